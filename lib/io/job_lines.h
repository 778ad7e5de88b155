// Reading the lines of a jobs file (jobs.h). A line is read with a bounded istream::getline
// through a fixed chunk, so neither a huge file nor one enormous line can grow host memory
// without limit; the bytes consumed are counted, so a line can be found again by its offset
// (job_ids.h re-reads an earlier line to settle a hash match).
#pragma once

#include <atomic>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace loom {

// Reads one line of `in` into `text` through `chunk`; false at end of input. A line longer
// than `max_bytes` is consumed to its end but only its first `max_bytes` are kept
// (`too_long`). `consumed` grows by the bytes read, the newline included. `path` names the
// input in the loom::Error a read failure throws. `stop` (optional) is looked at after every
// chunk of a line and at its end of input: once set, the line is given up and false returned,
// so a signal ends a read of a line that never ends (`--jobs /dev/zero`, a file with no newline
// growing without end) and of a pipe whose writer stopped inside a line (JobReader reads pipes
// through a buffer whose reads end at a stop).
bool read_job_line(std::istream& in, const std::string& path, std::vector<char>& chunk,
                   size_t max_bytes, std::string& text, bool& too_long, uint64_t& consumed,
                   const std::atomic<bool>* stop = nullptr);

// What the reader does to job line `line` before parsing it: drop a trailing CR (CRLF files)
// and, on line 1, a UTF-8 byte order mark.
void trim_job_line(std::string& text, int64_t line);

// Reads job line `line` again from byte `offset` of `in` and trims it as above. Throws
// loom::Error when no line starts there any more (the file changed during the run).
void reread_job_line(std::istream& in, const std::string& path, uint64_t offset, int64_t line,
                     std::vector<char>& chunk, size_t max_bytes, std::string& text, bool& too_long);

}  // namespace loom
