#include "app/cli_errors.h"

#include <algorithm>

#include <cstdlib>

#include "app/cli_options.h"
#include "app/cli_suggest.h"
#include "core/error.h"

namespace loom {
namespace {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// The subcommand being parsed when the error came (the root when none was reached).
const CLI::App& active_command(const CLI::App& app) {
  const std::vector<CLI::App*> subs = app.get_subcommands();
  return subs.empty() ? app : *subs.back();
}

// " (from LOOM_MAX_SEQS)" when the option's value came from its variable, not the command line.
std::string env_note(const CLI::Option& o, int argc, const char* const* argv) {
  const std::string env = o.get_envname();
  const char* value = env.empty() ? nullptr : std::getenv(env.c_str());
  if (value == nullptr || *value == '\0') return "";
  for (const std::string& typed : options_on_command_line(argc, argv))
    if (typed == o.get_name()) return "";
  return " (from " + env + ")";
}

// `loom rnu`: CLI11 reports only that a subcommand is missing; the word is in the leftovers.
std::string no_command(const CLI::App& app) {
  const std::vector<std::string> names = command_names(app);
  const std::vector<std::string> left = app.remaining();
  if (left.empty()) return cat("expected a command: ", join(names, ", "));
  if (left[0][0] != '-') {
    const std::string guess = closest_name(left[0], names);
    if (!guess.empty())
      return cat("unknown command \"", left[0], "\"; did you mean \"", guess, "\"?");
    return cat("unknown command \"", left[0], "\"; expected one of ", join(names, ", "));
  }
  return cat("unknown option ", left[0], " before the command; expected a command (",
             join(names, ", "), ") first, then its options");
}

// Arguments no option of the command took: a misspelt option (suggested), or a stray word.
std::string unexpected(const CLI::App& app, const CLI::App& cmd) {
  std::vector<std::string> left = cmd.remaining();
  const bool before_command = left.empty();
  if (before_command) left = app.remaining();
  if (left.empty()) return "";
  std::string option;
  for (const std::string& arg : left)
    if (arg.size() > 1 && arg[0] == '-') {
      option = arg.substr(0, arg.find('='));
      break;
    }
  if (option.empty())
    return cat(cmd.get_name(), ": unexpected argument \"", left[0], "\" (loom ", cmd.get_name(),
               " --help lists what it takes)");
  if (before_command)
    return cat("unknown option ", option, " before the command; options go after it: loom ",
               cmd.get_name(), " ", option, " ...");
  std::string guess;
  if (starts_with(option, "--")) {
    std::vector<std::string> names;
    for (const CLI::Option* o : cmd.get_options())
      for (const std::string& n : o->get_lnames()) names.push_back(n);
    guess = closest_name(option.substr(2), names);
  }
  return cat("unknown option ", option, " for ", cmd.get_name(),
             guess.empty() ? cat("; loom ", cmd.get_name(), " --help lists them")
                           : cat("; did you mean --", guess, "?"));
}

// "--model is required" → "run needs --model DIR (HF checkpoint directory; or set LOOM_MODEL)".
std::string required(const CLI::App& cmd, const std::string& what) {
  const std::string name = what.substr(0, what.find(' '));
  const CLI::Option* o = cmd.get_option_no_throw(name);
  if (o == nullptr) return what;
  const std::string env = o->get_envname();
  return cat(cmd.get_name(), " needs ", name, " ", o->get_type_name(), " (", o->get_description(),
             env.empty() ? "" : "; or set " + env, ")");
}

// "--max-seqs: expected an integer >= 1" (our validators) → "--max-seqs 0: expected ...".
std::string invalid(const CLI::App& cmd, const std::string& what, int argc,
                    const char* const* argv) {
  const size_t colon = what.find(": ");
  if (colon == std::string::npos) return what;
  const std::string name = what.substr(0, colon);
  const CLI::Option* o = cmd.get_option_no_throw(name);
  if (o == nullptr) return what;
  // CLI11 validates each value before it counts them: "--backend cpu --backend CPU" is a repeat.
  if (o->results().size() > 1 && o->get_expected_max() == 1)
    return cat(name, " given more than once; expected it once");
  return cat(name, " ", join(o->results(), ","), env_note(*o, argc, argv), ": ",
             what.substr(colon + 2));
}

// Values our validators let through but the option's type did not take (a flag's "maybe").
std::string not_converted(const CLI::App& cmd, const std::string& what, int argc,
                          const char* const* argv) {
  // CLI11: "Could not convert: --resume = maybe"
  const std::string prefix = "Could not convert: ";
  const size_t eq = what.find(" = ");
  if (!starts_with(what, prefix) || eq == std::string::npos) return what;
  const std::string name = what.substr(prefix.size(), eq - prefix.size());
  const CLI::Option* o = cmd.get_option_no_throw(name);
  if (o == nullptr) return what;
  const bool flag = o->get_expected_max() == 0;
  return cat(name, " ", what.substr(eq + 3), env_note(*o, argc, argv), ": expected ",
             flag ? "true or false (a flag)" : o->get_type_name());
}

// "--max-seqs: 1 required N missing" / "--max-seqs: At Most 1 required but received 2".
std::string mismatch(const CLI::App& cmd, const std::string& what) {
  const size_t colon = what.find(": ");
  if (colon == std::string::npos) return what;
  const std::string name = what.substr(0, colon);
  const CLI::Option* o = cmd.get_option_no_throw(name);
  if (o == nullptr) return what;
  if (what.find("missing") != std::string::npos)
    return cat(name, ": expected a value (", o->get_type_name(), ": ", o->get_description(), ")");
  if (what.find("At Most") != std::string::npos)
    return cat(name, " given more than once; expected it once");
  return what;
}

}  // namespace

std::string cli_error_line(const CLI::App& app, const CLI::Error& e, int argc,
                           const char* const* argv) {
  const std::string what = one_line(e.what());
  const CLI::App& cmd = active_command(app);
  // By type, not e.get_name(): CLI11 names an ExtrasError after the subcommand that threw it.
  auto is = [&e](auto* type) { return dynamic_cast<decltype(type)>(&e) != nullptr; };
  std::string line;
  // An unknown option explains a missing one better (a typo of it: "--mdoel"), so it comes first.
  if (is((const CLI::RequiredError*)nullptr))
    line = &cmd == &app               ? no_command(app)
           : !cmd.remaining().empty() ? unexpected(app, cmd)
                                      : required(cmd, what);
  if (is((const CLI::ExtrasError*)nullptr)) line = unexpected(app, cmd);
  if (is((const CLI::ValidationError*)nullptr)) line = invalid(cmd, what, argc, argv);
  if (is((const CLI::ConversionError*)nullptr)) line = not_converted(cmd, what, argc, argv);
  if (is((const CLI::ArgumentMismatch*)nullptr)) line = mismatch(cmd, what);
  return "loom: error: " + (line.empty() ? what : line) + "\n";
}

std::string cli_usage(const CLI::App& app) {
  std::string s = "usage: loom <command> [options]\n\ncommands:\n";
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  size_t width = 0;
  for (const CLI::App* sub : subs) width = std::max(width, sub->get_name().size());
  for (const CLI::App* sub : subs) {
    const std::string& name = sub->get_name();
    s += "  " + name + std::string(width + 2 - name.size(), ' ') + sub->get_description() + "\n";
  }
  s += "\n`loom <command> --help` lists a command's options with their defaults;\n";
  s += "`loom --version` prints the build.\n";
  return s;
}

}  // namespace loom
