#include <cstdio>

#include "app/commands.h"
#include "model/inspect.h"
#include "model/mapping.h"

namespace loom {

int inspect_command(const std::string& model_dir, const std::string& model_table) {
  LoadOptions lo;
  lo.table_path = model_table;
  const LoadedModel m = load_model(model_dir, lo);
  std::fputs(describe_model(m).c_str(), stdout);
  return kExitOk;
}

}  // namespace loom
