#pragma once
#include "io/shard.h"
namespace loom {
Shard resolve_shard(const std::string& flag, const EnvLookup& env = nullptr);
std::string unrequested_shard_warning(const EnvLookup& env = nullptr);
}
