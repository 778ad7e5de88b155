// Safetensors reader. A file is an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then
// the data section; offsets are relative to its start. The file is mmapped read-only and
// never copied: tensor(name) returns a view whose Tensor::owner keeps the mapping alive, so
// views outlive the SafetensorsFile that made them. Every entry is validated at open() —
// dtype, shape, byte count vs dtype × shape (overflow-safe), range inside the data section,
// no two tensors overlapping — and every failure names the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace loom {

class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // byte range [begin, end) relative to the data section
    uint64_t end = 0;
    // A safetensors dtype loom computes with none of (BOOL, I8, F64, …): its name, with dtype
    // U8 and shape as given; "" for the rest. Such a tensor can be present but never read.
    std::string foreign;
    size_t foreign_size = 0;  // its element's bytes
    uint64_t nbytes() const { return end - begin; }
  };

  // Maps and validates `path`; throws loom::Error naming the file (and tensor) on any defect.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<Entry>& entries() const { return entries_; }  // sorted by name
  const Entry* find(const std::string& name) const;               // nullptr if absent
  // Zero-copy view of `name`; throws naming the file if absent.
  Tensor tensor(const std::string& name) const;
  Tensor tensor(const Entry& entry) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const;

  // Hints the kernel to read the whole data section ahead (MADV_WILLNEED); optional.
  void prefetch() const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<const Mapping> mapping_;
  const uint8_t* data_ = nullptr;  // start of the data section inside the mapping
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;  // name → entries_ position
  std::map<std::string, std::string> metadata_;
};

}  // namespace loom
