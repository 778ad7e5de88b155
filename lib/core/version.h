// loom's version, written into every artifact (dataset files, manifests, sidecars, reports).
#pragma once

namespace loom {

constexpr const char* kLoomVersion = "0.6.1";

}  // namespace loom
