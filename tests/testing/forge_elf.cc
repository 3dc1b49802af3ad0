#include "tests/testing/forge_elf.h"

#include <cstring>
#include <stdexcept>

namespace prewarm::testing {
namespace {

constexpr uint32_t kProgbits = 1, kStrtab = 3, kNote = 7, kDynsym = 11;

template <typename T>
T Get(std::string_view b, uint64_t offset) {
  if (offset + sizeof(T) > b.size()) throw std::out_of_range("ElfImage: truncated ELF file");
  T v;
  std::memcpy(&v, b.data() + offset, sizeof(T));
  return v;
}

template <typename T>
void Put(std::string& b, uint64_t offset, T v) {
  std::memcpy(b.data() + offset, &v, sizeof(T));
}

template <typename T>
void Add(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// A msgpack map {"amdhsa.kernels": [], "x": [n copies of `item`]} (array 32).
std::string Metadata(uint32_t n, char item) {
  std::string m =
      "\x82\xae"
      "amdhsa.kernels"
      "\x90\xa1x\xdd";
  for (int shift = 24; shift >= 0; shift -= 8) m += static_cast<char>((n >> shift) & 0xff);
  m.append(n, item);
  return m;
}

}  // namespace

ElfImage::ElfImage(std::string_view elf) : bytes_(elf) {
  const uint64_t shoff = Get<uint64_t>(elf, 40);
  const uint16_t shnum = Get<uint16_t>(elf, 60);
  shstrndx = Get<uint16_t>(elf, 62);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t h = shoff + uint64_t{i} * 64;
    ElfSection s;
    s.name = Get<uint32_t>(elf, h);
    s.type = Get<uint32_t>(elf, h + 4);
    s.flags = Get<uint64_t>(elf, h + 8);
    s.addr = Get<uint64_t>(elf, h + 16);
    s.offset = Get<uint64_t>(elf, h + 24);
    s.size = Get<uint64_t>(elf, h + 32);
    s.link = Get<uint32_t>(elf, h + 40);
    s.info = Get<uint32_t>(elf, h + 44);
    s.align = Get<uint64_t>(elf, h + 48);
    s.entsize = Get<uint64_t>(elf, h + 56);
    sections_.push_back(s);
  }
}

uint64_t ElfImage::Append(std::string_view data) {
  bytes_.append((8 - bytes_.size() % 8) % 8, '\0');
  const uint64_t at = bytes_.size();
  bytes_.append(data);
  return at;
}

int ElfImage::Find(uint32_t type) const {
  for (size_t i = 0; i < sections_.size(); ++i) {
    if (sections_[i].type == type) return static_cast<int>(i);
  }
  return -1;
}

std::string ElfImage::Write() const {
  std::string out = bytes_;
  out.append((8 - out.size() % 8) % 8, '\0');
  const uint64_t shoff = out.size();
  for (const ElfSection& s : sections_) {
    Add(out, s.name);
    Add(out, s.type);
    Add(out, s.flags);
    Add(out, s.addr);
    Add(out, s.offset);
    Add(out, s.size);
    Add(out, s.link);
    Add(out, s.info);
    Add(out, s.align);
    Add(out, s.entsize);
  }
  Put<uint64_t>(out, 40, shoff);
  Put<uint16_t>(out, 60, static_cast<uint16_t>(sections_.size()));
  Put<uint16_t>(out, 62, shstrndx);
  return out;
}

std::string AmdgpuMetadataNote(std::string_view desc) {
  std::string n;
  Add<uint32_t>(n, 7);  // "AMDGPU\0"
  Add<uint32_t>(n, static_cast<uint32_t>(desc.size()));
  Add<uint32_t>(n, 32);  // NT_AMDGPU_METADATA
  n.append("AMDGPU\0\0", 8);
  n.append(desc);
  n.append((4 - desc.size() % 4) % 4, '\0');
  return n;
}

std::string ForgeSectionNames(std::string_view code) {
  ElfImage elf(code);
  std::string name(1 << 20, 'A');
  name += '\0';
  ElfSection table;
  table.type = kStrtab;
  table.offset = elf.Append(name);
  table.size = name.size();
  elf.shstrndx = static_cast<uint16_t>(elf.sections().size());
  elf.sections().push_back(table);
  for (ElfSection& s : elf.sections()) s.name = 0;
  table.type = kProgbits;
  elf.sections().resize(65000, table);
  return elf.Write();
}

std::string ForgeRepeatedNotes(std::string_view code, int sections) {
  ElfImage elf(code);
  const int at = elf.Find(kNote);
  if (at < 0) throw std::invalid_argument("ForgeRepeatedNotes: no note section");
  const std::string note = AmdgpuMetadataNote(Metadata(60000, '\x01'));
  ElfSection& s = elf.sections()[static_cast<size_t>(at)];
  s.offset = elf.Append(note);
  s.size = note.size();
  const ElfSection copy = s;
  elf.sections().resize(static_cast<size_t>(sections), copy);
  return elf.Write();
}

std::string ForgeOverlappingSections(std::string_view code, int copies) {
  ElfImage elf(code);
  std::string notes;  // 12-byte notes of type 1, name and description empty
  while (notes.size() < (1 << 20)) {
    Add<uint32_t>(notes, 0);
    Add<uint32_t>(notes, 0);
    Add<uint32_t>(notes, 1);
  }
  ElfSection s;
  s.type = kNote;
  s.offset = elf.Append(notes);
  s.size = notes.size();
  s.align = 4;
  elf.sections().resize(elf.sections().size() + static_cast<size_t>(copies), s);
  return elf.Write();
}

std::string ForgeSymbolNames(std::string_view code) {
  ElfImage elf(code);
  const int at = elf.Find(kDynsym);
  if (at < 0) throw std::invalid_argument("ForgeSymbolNames: no dynamic symbol table");
  std::string names(1, '\0');
  names.append(1 << 20, 'B');
  names += '\0';
  ElfSection strings;
  strings.type = kStrtab;
  strings.offset = elf.Append(names);
  strings.size = names.size();
  std::string symbols;
  for (int i = 0; i < 100000; ++i) {
    Add<uint32_t>(symbols, 1);  // st_name: the 1 MiB name
    Add<uint8_t>(symbols, 0);   // st_info
    Add<uint8_t>(symbols, 0);   // st_other
    Add<uint16_t>(symbols, 0);  // st_shndx
    Add<uint64_t>(symbols, 0);  // st_value
    Add<uint64_t>(symbols, 0);  // st_size
  }
  ElfSection& dynsym = elf.sections()[static_cast<size_t>(at)];
  dynsym.offset = elf.Append(symbols);
  dynsym.size = symbols.size();
  dynsym.link = static_cast<uint32_t>(elf.sections().size());
  elf.sections().push_back(strings);
  return elf.Write();
}

std::string ForgeMetadataValues(std::string_view code, uint32_t values) {
  ElfImage elf(code);
  const int at = elf.Find(kNote);
  if (at < 0) throw std::invalid_argument("ForgeMetadataValues: no note section");
  const std::string note = AmdgpuMetadataNote(Metadata(values, '\xc0'));
  ElfSection& s = elf.sections()[static_cast<size_t>(at)];
  s.offset = elf.Append(note);
  s.size = note.size();
  return elf.Write();
}

}  // namespace prewarm::testing
