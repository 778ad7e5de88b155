// Dataset output (issue 5 §5): `--tokens-out DIR` writes each finished sample's tokens as a
// safetensors file that numpy, torch and the `safetensors` package load directly:
//   DIR/<file id>.sample-<k>.safetensors
//     "tokens": int32 [frames, tokens_per_frame]  (plain models: [1, n])
//     __metadata__: {"id": <job id>, "sample": "<k>", "seed": "<seed>", "model": <name>}
// Job ids are user text; the file name must never leave DIR, so the id is sanitized (see
// tokens_file_id) and the original id is kept in the metadata. Files are written beside their
// final name and renamed into place, so DIR never holds a half-written file under a real name.
#pragma once

#include <cstdint>
#include <string>

#include "io/results.h"

namespace loom {

constexpr size_t kMaxFileIdChars = 120;  // sanitized ids are cut here (before the hash)

// The id as a file-name stem: [A-Za-z0-9._-] kept, every other byte (and a leading '.')
// becomes '_', cut to kMaxFileIdChars; when anything changed, "-" and 8 hex digits of a hash
// of the original id are appended so distinct ids keep distinct files ("a/b" → "a_b-…",
// never "a_b"). Throws loom::Error for "", "." and "..".
std::string tokens_file_id(const std::string& id);

// "<tokens_file_id(id)>.sample-<sample>.safetensors"
std::string tokens_file_name(const std::string& id, uint32_t sample);

// Writes `r` (an ok record) into `dir` (created if missing); returns the path written.
// Throws loom::Error naming the path when it cannot write, or when frames are ragged.
std::string write_tokens_safetensors(const std::string& dir, const JobResult& r,
                                     const std::string& model_name, uint64_t seed);

}  // namespace loom
