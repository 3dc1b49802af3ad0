// Forged code objects for the tests of toolchain/code_object.h's bounds: a real AMDGPU code
// object (hipRTC's) with its ELF section or symbol tables, or its msgpack metadata, rewritten the
// way a hostile writer of the cache volume could. Each forgery was a crash (memory without bound)
// or minutes of CPU in the reader before it had bounds, and is a few MB.
#ifndef PREWARM_TESTS_TESTING_FORGE_ELF_H_
#define PREWARM_TESTS_TESTING_FORGE_ELF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prewarm::testing {

// One section header of a 64-bit little-endian ELF file.
struct ElfSection {
  uint32_t name = 0, type = 0;
  uint64_t flags = 0, addr = 0, offset = 0, size = 0;
  uint32_t link = 0, info = 0;
  uint64_t align = 1, entsize = 0;
};

// An ELF file to rewrite: data is appended, the section headers edited, and Write() puts a new
// section header table at the end (the old one stays, unreferenced).
class ElfImage {
 public:
  explicit ElfImage(std::string_view elf);
  std::vector<ElfSection>& sections() { return sections_; }
  uint16_t shstrndx = 0;
  // Appends `data` at an 8-byte boundary; its offset.
  uint64_t Append(std::string_view data);
  // The index of the first section of `type` (SHT_*), or -1.
  int Find(uint32_t type) const;
  std::string Write() const;

 private:
  std::string bytes_;
  std::vector<ElfSection> sections_;
};

// An AMDGPU note (NT_AMDGPU_METADATA, name "AMDGPU") holding `desc`.
std::string AmdgpuMetadataNote(std::string_view desc);

// The forgeries of a real AMDGPU code object `code`:
// 65000 sections, every name (and the section name table) one 1 MiB string: a name copied per
// section made 64 GiB.
std::string ForgeSectionNames(std::string_view code);
// The metadata note, its msgpack 60000 values, listed again by every section added up to
// `sections` in all: parsed once per copy, 65000 sections took about 6 minutes.
std::string ForgeRepeatedNotes(std::string_view code, int sections);
// `copies` note sections over one 1 MiB run of small notes (no metadata among them): walked once
// per copy.
std::string ForgeOverlappingSections(std::string_view code, int copies);
// A dynamic symbol table of 100000 symbols each named by one 1 MiB string: 100 GB of copies.
std::string ForgeSymbolNames(std::string_view code);
// The metadata replaced by {"amdhsa.kernels": [], "x": [`values` nils]}.
std::string ForgeMetadataValues(std::string_view code, uint32_t values);

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_FORGE_ELF_H_
