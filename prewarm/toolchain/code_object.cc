#include "prewarm/toolchain/code_object.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

constexpr uint16_t kMachineAmdgpu = 224;  // EM_AMDGPU
constexpr uint16_t kMachineCuda = 190;    // EM_CUDA
constexpr uint32_t kSectionNull = 0, kSectionProgbits = 1, kSectionSymtab = 2, kSectionNote = 7,
                   kSectionNobits = 8, kSectionDynsym = 11;     // SHT_*
constexpr uint8_t kSymbolFunc = 2;                              // STT_FUNC
constexpr uint32_t kNoteAmdgpuMetadata = 32;                    // NT_AMDGPU_METADATA
constexpr uint8_t kCudaEntry = 0x10;                            // STO_CUDA_ENTRY in st_other
constexpr uint8_t kAttrFrameSize = 0x11, kAttrRegCount = 0x2f;  // EIATTR_*
constexpr int kMsgpackMaxDepth = 64;

// Hard bounds: an entry is as trusted as whoever can write the volume, and its checksum proves
// nothing about intent. Real code objects sit far below each (hipRTC's: 13 sections, a handful
// of symbols, one note of under 1 KiB; NVRTC's: about 20 sections and 40 symbols). With them,
// memory and work grow at most linearly in the code object's size: names are views into it,
// never copies, and every lookup goes through a map built once.
constexpr uint32_t kMaxSections = 1024;
constexpr uint64_t kMaxSymbols = 8192;           // in the one symbol table read
constexpr size_t kMaxNameBytes = 4096;           // a section or symbol name
constexpr uint64_t kMaxMetadataBytes = 1 << 20;  // the AMDGPU metadata note's msgpack
constexpr int64_t kMaxMsgpackValues = 1 << 16;
constexpr size_t kMaxKernels = 256;

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(StrCat("code object: ", what));
}

// Bounds-checked little-endian reads from the buffer.
class Bytes {
 public:
  explicit Bytes(std::string_view b) : b_(b) {}
  bool Has(uint64_t offset, uint64_t size) const {
    return offset <= b_.size() && size <= b_.size() - offset;
  }
  template <typename T>
  absl::StatusOr<T> Get(uint64_t offset) const {
    if (!Has(offset, sizeof(T))) return Bad(StrCat("truncated at byte ", offset));
    T v;
    std::memcpy(&v, b_.data() + offset, sizeof(T));
    return v;
  }
  absl::StatusOr<std::string_view> Slice(uint64_t offset, uint64_t size) const {
    if (!Has(offset, size)) {
      return Bad(StrCat(size, " bytes at ", offset, " extend past the end (", b_.size(), ")"));
    }
    return b_.substr(offset, size);
  }
  size_t size() const { return b_.size(); }

 private:
  std::string_view b_;
};

struct Section {
  std::string_view name;  // into the code object
  uint32_t type = 0;
  uint64_t addr = 0, offset = 0, size = 0;
  uint32_t link = 0;
};

struct Symbol {
  std::string_view name;  // into the code object
  uint8_t type = 0;       // STT_*
  uint8_t other = 0;
  uint64_t value = 0, size = 0;
};

struct Elf {
  uint16_t machine = 0;
  uint8_t abi_version = 0;
  uint32_t flags = 0;
  std::vector<Section> sections;
};

// The NUL-terminated string at `offset` of a string table, at most kMaxNameBytes long (the scan
// stops there: a table of one unterminated megabyte costs each name 4 KiB, not a megabyte).
absl::StatusOr<std::string_view> CString(std::string_view table, uint64_t offset) {
  if (offset >= table.size()) return Bad("string offset past its table");
  const std::string_view rest = table.substr(offset, kMaxNameBytes + 1);
  const size_t end = rest.find('\0');
  if (end == std::string_view::npos) {
    return Bad(rest.size() > kMaxNameBytes ? StrCat("a name longer than ", kMaxNameBytes, " bytes")
                                           : "unterminated string");
  }
  return rest.substr(0, end);
}

// The bytes of the sections walked one record at a time (notes, the symbol table, .nv.info)
// must add up to no more than the file: sections that overlap, or one section listed many
// times, would otherwise have the same bytes parsed again and again.
class WalkBudget {
 public:
  explicit WalkBudget(uint64_t file_size) : left_(file_size) {}
  absl::Status Take(const Section& s) {
    if (s.size > left_) {
      return Bad(StrCat("the sections read overlap: section ", s.name, " (", s.size,
                        " bytes) goes past the ", left_, " bytes of the file not yet read"));
    }
    left_ -= s.size;
    return absl::OkStatus();
  }

 private:
  uint64_t left_;
};

absl::StatusOr<Elf> ReadElf(const Bytes& b) {
  if (!b.Has(0, 4) || b.Slice(0, 4).value() !=
                          "\x7f"
                          "ELF")
    return Bad("not an ELF file");
  ASSIGN_OR_RETURN(std::string_view ident, b.Slice(0, 16));
  if (ident[4] != 2 || ident[5] != 1) return Bad("not a 64-bit little-endian ELF file");
  Elf elf;
  elf.abi_version = static_cast<uint8_t>(ident[8]);
  ASSIGN_OR_RETURN(elf.machine, b.Get<uint16_t>(18));
  ASSIGN_OR_RETURN(elf.flags, b.Get<uint32_t>(48));
  ASSIGN_OR_RETURN(const uint64_t shoff, b.Get<uint64_t>(40));
  ASSIGN_OR_RETURN(const uint16_t shentsize, b.Get<uint16_t>(58));
  ASSIGN_OR_RETURN(const uint16_t shnum, b.Get<uint16_t>(60));
  ASSIGN_OR_RETURN(const uint16_t shstrndx, b.Get<uint16_t>(62));
  if (shnum == 0) return Bad("no section headers");
  if (shentsize != 64) return Bad(StrCat("section header size ", shentsize, ", expected 64"));
  if (shnum > kMaxSections) return Bad(StrCat(shnum, " sections, more than ", kMaxSections));
  if (!b.Has(shoff, uint64_t{shnum} * 64)) return Bad("section headers extend past the end");
  std::vector<uint32_t> names(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t h = shoff + uint64_t{i} * 64;
    Section s;
    ASSIGN_OR_RETURN(names[i], b.Get<uint32_t>(h));
    ASSIGN_OR_RETURN(s.type, b.Get<uint32_t>(h + 4));
    ASSIGN_OR_RETURN(s.addr, b.Get<uint64_t>(h + 16));
    ASSIGN_OR_RETURN(s.offset, b.Get<uint64_t>(h + 24));
    ASSIGN_OR_RETURN(s.size, b.Get<uint64_t>(h + 32));
    ASSIGN_OR_RETURN(s.link, b.Get<uint32_t>(h + 40));
    if (s.type != kSectionNobits && s.type != kSectionNull && !b.Has(s.offset, s.size)) {
      return Bad(StrCat("section ", i, " extends past the end"));
    }
    elf.sections.push_back(s);
  }
  if (shstrndx >= shnum) return Bad("no section name table");
  ASSIGN_OR_RETURN(std::string_view shstr,
                   b.Slice(elf.sections[shstrndx].offset, elf.sections[shstrndx].size));
  for (uint16_t i = 0; i < shnum; ++i) {
    ASSIGN_OR_RETURN(elf.sections[i].name, CString(shstr, names[i]));
  }
  return elf;
}

// The symbols of the first section of `type` (SHT_DYNSYM or SHT_SYMTAB); empty if none.
absl::StatusOr<std::vector<Symbol>> ReadSymbols(const Bytes& b, const Elf& elf, uint32_t type,
                                                WalkBudget& budget) {
  std::vector<Symbol> out;
  for (const Section& s : elf.sections) {
    if (s.type != type) continue;
    if (s.link >= elf.sections.size()) return Bad("symbol table without its string table");
    if (s.size / 24 > kMaxSymbols) {
      return Bad(StrCat("symbol table ", s.name, " of ", s.size / 24, " symbols, more than ",
                        kMaxSymbols));
    }
    RETURN_IF_ERROR(budget.Take(s));
    const Section& strs = elf.sections[s.link];
    ASSIGN_OR_RETURN(std::string_view table, b.Slice(strs.offset, strs.size));
    for (uint64_t o = s.offset; o + 24 <= s.offset + s.size; o += 24) {
      Symbol sym;
      ASSIGN_OR_RETURN(const uint32_t name, b.Get<uint32_t>(o));
      ASSIGN_OR_RETURN(const uint8_t info, b.Get<uint8_t>(o + 4));
      ASSIGN_OR_RETURN(sym.other, b.Get<uint8_t>(o + 5));
      ASSIGN_OR_RETURN(sym.value, b.Get<uint64_t>(o + 8));
      ASSIGN_OR_RETURN(sym.size, b.Get<uint64_t>(o + 16));
      ASSIGN_OR_RETURN(sym.name, CString(table, name));
      sym.type = info & 0xf;
      out.push_back(sym);
    }
    break;
  }
  return out;
}

// ---- msgpack ---------------------------------------------------------------------------------

class Msgpack {
 public:
  explicit Msgpack(std::string_view b) : b_(b) {}

  absl::StatusOr<nlohmann::json> Value(int depth) {
    if (depth > kMsgpackMaxDepth) return Bad("metadata nested deeper than 64");
    if (++values_ > kMaxMsgpackValues) {
      return Bad(StrCat("metadata holds more than ", kMaxMsgpackValues, " values"));
    }
    ASSIGN_OR_RETURN(const uint64_t byte, Uint(1));
    const uint8_t t = static_cast<uint8_t>(byte);
    if (t <= 0x7f) return nlohmann::json(t);
    if (t >= 0xe0) return nlohmann::json(static_cast<int8_t>(t));
    if ((t & 0xf0) == 0x80) return Map(t & 0x0f, depth);
    if ((t & 0xf0) == 0x90) return Array(t & 0x0f, depth);
    if ((t & 0xe0) == 0xa0) return Str(t & 0x1f);
    switch (t) {
      case 0xc0:
        return nlohmann::json(nullptr);
      case 0xc2:
        return nlohmann::json(false);
      case 0xc3:
        return nlohmann::json(true);
      case 0xc4:
      case 0xc5:
      case 0xc6: {  // bin 8/16/32
        ASSIGN_OR_RETURN(const uint64_t n, Uint(1 << (t - 0xc4)));
        RETURN_IF_ERROR(Skip(n));
        return nlohmann::json(nullptr);
      }
      case 0xc7:
      case 0xc8:
      case 0xc9: {  // ext 8/16/32
        ASSIGN_OR_RETURN(const uint64_t n, Uint(1 << (t - 0xc7)));
        RETURN_IF_ERROR(Skip(n + 1));
        return nlohmann::json(nullptr);
      }
      case 0xca: {
        ASSIGN_OR_RETURN(const uint64_t u, Uint(4));
        float f;
        const uint32_t u32 = static_cast<uint32_t>(u);
        std::memcpy(&f, &u32, 4);
        return nlohmann::json(f);
      }
      case 0xcb: {
        ASSIGN_OR_RETURN(const uint64_t u, Uint(8));
        double d;
        std::memcpy(&d, &u, 8);
        return nlohmann::json(d);
      }
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xcf: {
        ASSIGN_OR_RETURN(const uint64_t u, Uint(1 << (t - 0xcc)));
        return nlohmann::json(u);
      }
      case 0xd0:
      case 0xd1:
      case 0xd2:
      case 0xd3: {
        const int n = 1 << (t - 0xd0);
        ASSIGN_OR_RETURN(const uint64_t u, Uint(n));
        const int shift = 64 - 8 * n;  // sign-extend
        return nlohmann::json(static_cast<int64_t>(u << shift) >> shift);
      }
      case 0xd4:
      case 0xd5:
      case 0xd6:
      case 0xd7:
      case 0xd8:  // fixext 1/2/4/8/16
        RETURN_IF_ERROR(Skip(1 + (uint64_t{1} << (t - 0xd4))));
        return nlohmann::json(nullptr);
      case 0xd9:
      case 0xda:
      case 0xdb: {
        ASSIGN_OR_RETURN(const uint64_t n, Uint(1 << (t - 0xd9)));
        return Str(n);
      }
      case 0xdc:
      case 0xdd: {
        ASSIGN_OR_RETURN(const uint64_t n, Uint(t == 0xdc ? 2 : 4));
        return Array(n, depth);
      }
      case 0xde:
      case 0xdf: {
        ASSIGN_OR_RETURN(const uint64_t n, Uint(t == 0xde ? 2 : 4));
        return Map(n, depth);
      }
      default:
        return Bad(StrCat("metadata: unknown msgpack type 0x", Hex(t)));
    }
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  static std::string Hex(uint8_t v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    return {kDigits[v >> 4], kDigits[v & 15]};
  }
  // A big-endian unsigned integer of n bytes.
  absl::StatusOr<uint64_t> Uint(int n) {
    if (b_.size() - pos_ < static_cast<size_t>(n)) return Bad("metadata truncated");
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = v << 8 | static_cast<uint8_t>(b_[pos_++]);
    return v;
  }
  absl::Status Skip(uint64_t n) {
    if (b_.size() - pos_ < n) return Bad("metadata truncated");
    pos_ += n;
    return absl::OkStatus();
  }
  absl::StatusOr<nlohmann::json> Str(uint64_t n) {
    if (b_.size() - pos_ < n) return Bad("metadata truncated");
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return nlohmann::json(std::move(s));
  }
  // Each element takes at least one byte, so a count beyond what is left is malformed (and
  // would otherwise reserve memory for nothing).
  absl::Status CheckCount(uint64_t n, uint64_t per) const {
    if (n > (b_.size() - pos_) / per) return Bad("metadata count exceeds its bytes");
    return absl::OkStatus();
  }
  absl::StatusOr<nlohmann::json> Array(uint64_t n, int depth) {
    RETURN_IF_ERROR(CheckCount(n, 1));
    nlohmann::json a = nlohmann::json::array();
    for (uint64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(nlohmann::json v, Value(depth + 1));
      a.push_back(std::move(v));
    }
    return a;
  }
  absl::StatusOr<nlohmann::json> Map(uint64_t n, int depth) {
    RETURN_IF_ERROR(CheckCount(n, 2));
    nlohmann::json m = nlohmann::json::object();
    for (uint64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(nlohmann::json k, Value(depth + 1));
      if (!k.is_string()) return Bad("metadata: a map key is not a string");
      ASSIGN_OR_RETURN(nlohmann::json v, Value(depth + 1));
      m[k.get<std::string>()] = std::move(v);
    }
    return m;
  }

  std::string_view b_;
  size_t pos_ = 0;
  int64_t values_ = 0;
};

// ---- AMDGPU ----------------------------------------------------------------------------------

std::string AmdgpuMachine(uint32_t flags) {
  static const std::map<uint32_t, std::string_view> kMach = {
      {0x30, "gfx908"},  {0x3f, "gfx90a"},  {0x4c, "gfx942"},  {0x4f, "gfx950"},
      {0x36, "gfx1030"}, {0x41, "gfx1100"}, {0x48, "gfx1200"}, {0x4e, "gfx1201"}};
  auto it = kMach.find(flags & 0xff);
  return it == kMach.end() ? std::string() : std::string(it->second);
}

// An integer field of a kernel's metadata map, 0 to 2^31 - 1; `required` ones must be present.
absl::StatusOr<int> MetaInt(const nlohmann::json& k, const char* field, bool required) {
  auto it = k.find(field);
  if (it == k.end()) {
    if (!required) return 0;
    return Bad(StrCat("metadata: kernel without ", field));
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<int64_t>() > std::numeric_limits<int>::max()) {
    return Bad(StrCat("metadata: ", field, " is not an integer from 0 to 2^31 - 1"));
  }
  return static_cast<int>(it->get<int64_t>());
}

absl::Status ReadAmdgpu(const Bytes& b, const Elf& elf, CodeObjectInfo& info) {
  WalkBudget budget(b.size());
  std::optional<nlohmann::json> meta;
  for (const Section& s : elf.sections) {
    if (s.type != kSectionNote) continue;
    RETURN_IF_ERROR(budget.Take(s));
    for (uint64_t o = s.offset; o + 12 <= s.offset + s.size;) {
      ASSIGN_OR_RETURN(const uint32_t namesz, b.Get<uint32_t>(o));
      ASSIGN_OR_RETURN(const uint32_t descsz, b.Get<uint32_t>(o + 4));
      ASSIGN_OR_RETURN(const uint32_t type, b.Get<uint32_t>(o + 8));
      const uint64_t name_at = o + 12, desc_at = name_at + (uint64_t{namesz} + 3) / 4 * 4;
      const uint64_t next = desc_at + (uint64_t{descsz} + 3) / 4 * 4;
      if (next > s.offset + s.size) return Bad("a note extends past its section");
      ASSIGN_OR_RETURN(std::string_view name, b.Slice(name_at, namesz));
      if (type == kNoteAmdgpuMetadata && name == std::string_view("AMDGPU\0", 7)) {
        if (meta.has_value()) return Bad("more than one AMDGPU metadata note");
        if (descsz > kMaxMetadataBytes) {
          return Bad(
              StrCat("AMDGPU metadata of ", descsz, " bytes, more than ", kMaxMetadataBytes));
        }
        ASSIGN_OR_RETURN(std::string_view desc, b.Slice(desc_at, descsz));
        Msgpack m(desc);
        ASSIGN_OR_RETURN(nlohmann::json v, m.Value(0));
        meta = std::move(v);
      }
      o = next;
    }
  }
  if (!meta.has_value()) return Bad("no AMDGPU metadata note");
  const auto kernels = meta->find("amdhsa.kernels");
  if (!meta->is_object() || kernels == meta->end() || !kernels->is_array()) {
    return Bad("metadata has no amdhsa.kernels list");
  }
  if (kernels->size() > kMaxKernels) {
    return Bad(StrCat("metadata lists ", kernels->size(), " kernels, more than ", kMaxKernels));
  }
  ASSIGN_OR_RETURN(std::vector<Symbol> symbols, ReadSymbols(b, elf, kSectionDynsym, budget));
  if (symbols.empty()) {
    ASSIGN_OR_RETURN(symbols, ReadSymbols(b, elf, kSectionSymtab, budget));
  }
  // The first symbol of each name, and the first function symbol of each name.
  std::map<std::string_view, const Symbol*> by_name, function_by_name;
  for (const Symbol& s : symbols) {
    by_name.emplace(s.name, &s);
    if (s.type == kSymbolFunc) function_by_name.emplace(s.name, &s);
  }
  for (const nlohmann::json& k : *kernels) {
    if (!k.is_object() || !k.contains(".name") || !k[".name"].is_string()) {
      return Bad("metadata: a kernel without a name");
    }
    KernelResources r;
    r.name = k[".name"].get<std::string>();
    const std::string where = StrCat("kernel ", r.name, ": ");
    ASSIGN_OR_RETURN(r.registers, MetaInt(k, ".vgpr_count", true));
    ASSIGN_OR_RETURN(r.sgprs, MetaInt(k, ".sgpr_count", true));
    ASSIGN_OR_RETURN(r.agprs, MetaInt(k, ".agpr_count", false));
    ASSIGN_OR_RETURN(r.static_lds_bytes, MetaInt(k, ".group_segment_fixed_size", true));
    ASSIGN_OR_RETURN(r.scratch_bytes, MetaInt(k, ".private_segment_fixed_size", true));
    ASSIGN_OR_RETURN(r.wave_size, MetaInt(k, ".wavefront_size", true));
    ASSIGN_OR_RETURN(r.vgpr_spills, MetaInt(k, ".vgpr_spill_count", false));
    ASSIGN_OR_RETURN(r.sgpr_spills, MetaInt(k, ".sgpr_spill_count", false));
    ASSIGN_OR_RETURN(r.max_threads, MetaInt(k, ".max_flat_workgroup_size", false));
    if (r.wave_size != 32 && r.wave_size != 64) {
      return Bad(StrCat(where, "wavefront size ", r.wave_size));
    }
    // The descriptor: the symbol the metadata names, which must be <name>.kd, 64 bytes, in a
    // section of the file; its LDS, scratch and wave32 bit must agree with the metadata.
    const std::string kd = r.name + ".kd";
    if (!k.contains(".symbol") || k[".symbol"] != kd) {
      return Bad(StrCat(where, "metadata symbol is not ", kd));
    }
    const auto sym_it = by_name.find(kd);
    if (sym_it == by_name.end() || sym_it->second->size != 64) {
      return Bad(StrCat(where, "no 64-byte kernel descriptor ", kd));
    }
    const Symbol* sym = sym_it->second;
    if (function_by_name.find(r.name) == function_by_name.end()) {
      return Bad(StrCat(where, "no function symbol"));
    }
    auto sec = std::find_if(elf.sections.begin(), elf.sections.end(), [&](const Section& s) {
      return s.type == kSectionProgbits && sym->value >= s.addr &&
             sym->value - s.addr + 64 <= s.size;
    });
    if (sec == elf.sections.end()) return Bad(StrCat(where, kd, " lies outside every section"));
    const uint64_t at = sec->offset + (sym->value - sec->addr);
    ASSIGN_OR_RETURN(const uint32_t group, b.Get<uint32_t>(at));
    ASSIGN_OR_RETURN(const uint32_t priv, b.Get<uint32_t>(at + 4));
    ASSIGN_OR_RETURN(const uint16_t props, b.Get<uint16_t>(at + 56));
    const int kd_wave = (props & (1u << 10)) ? 32 : 64;  // ENABLE_WAVEFRONT_SIZE32
    if (group != r.static_lds_bytes || priv != r.scratch_bytes || kd_wave != r.wave_size) {
      return Bad(StrCat(where, "descriptor (LDS ", group, ", scratch ", priv, ", wave ", kd_wave,
                        ") disagrees with the metadata (LDS ", r.static_lds_bytes, ", scratch ",
                        r.scratch_bytes, ", wave ", r.wave_size, ")"));
    }
    info.kernels.push_back(std::move(r));
  }
  return absl::OkStatus();
}

// ---- cubin -----------------------------------------------------------------------------------

absl::Status ReadCubin(const Bytes& b, const Elf& elf, CodeObjectInfo& info) {
  // ABI version 8 (CUDA 12.8 and later) moved the SM number to bits 8..15 of e_flags.
  const uint32_t sm = elf.abi_version >= 8 ? (elf.flags >> 8) & 0xff : elf.flags & 0xff;
  info.arch = StrCat("sm_", sm);
  WalkBudget budget(b.size());
  ASSIGN_OR_RETURN(const std::vector<Symbol> symbols, ReadSymbols(b, elf, kSectionSymtab, budget));
  // Per symbol index: registers, frame. Records naming no symbol of the table are ignored.
  std::vector<std::pair<int, int64_t>> by_symbol(symbols.size());
  // The static shared memory of each entry: the size of .nv.shared.<entry> (the last such).
  std::map<std::string_view, uint64_t> shared;
  constexpr std::string_view kShared = ".nv.shared.";
  for (const Section& s : elf.sections) {
    if (s.name.starts_with(kShared)) shared[s.name.substr(kShared.size())] = s.size;
    if (s.name != ".nv.info") continue;
    RETURN_IF_ERROR(budget.Take(s));
    // Records: u8 format, u8 attribute, then (format 4, EIFMT_SVAL) a u16 size and the value.
    for (uint64_t o = s.offset; o + 4 <= s.offset + s.size;) {
      ASSIGN_OR_RETURN(const uint8_t format, b.Get<uint8_t>(o));
      ASSIGN_OR_RETURN(const uint8_t attr, b.Get<uint8_t>(o + 1));
      if (format != 4) break;  // the global table holds only sized records
      ASSIGN_OR_RETURN(const uint16_t size, b.Get<uint16_t>(o + 2));
      if (o + 4 + size > s.offset + s.size) return Bad(".nv.info record past its section");
      if ((attr == kAttrRegCount || attr == kAttrFrameSize) && size == 8) {
        ASSIGN_OR_RETURN(const uint32_t index, b.Get<uint32_t>(o + 4));
        ASSIGN_OR_RETURN(const uint32_t value, b.Get<uint32_t>(o + 8));
        if (index < by_symbol.size()) {
          auto& v = by_symbol[index];
          if (attr == kAttrRegCount) {
            v.first = static_cast<int>(value);
          } else {
            v.second = value;
          }
        }
      }
      o += 4 + size;
    }
  }
  for (size_t i = 0; i < symbols.size(); ++i) {
    const Symbol& s = symbols[i];
    if (s.type != kSymbolFunc || !(s.other & kCudaEntry)) continue;
    if (info.kernels.size() == kMaxKernels) {
      return Bad(StrCat("cubin has more than ", kMaxKernels, " entry kernels"));
    }
    KernelResources r;
    r.name = std::string(s.name);
    r.wave_size = 32;
    if (by_symbol[i].first == 0) {
      return Bad(StrCat("kernel ", s.name, ": no register count in .nv.info"));
    }
    r.registers = by_symbol[i].first;
    r.scratch_bytes = by_symbol[i].second;
    if (auto it = shared.find(s.name); it != shared.end()) {
      r.static_lds_bytes = static_cast<int64_t>(it->second);
    }
    info.kernels.push_back(std::move(r));
  }
  if (info.kernels.empty()) return Bad("cubin has no entry kernels");
  return absl::OkStatus();
}

int RoundUp(int v, int g) { return (v + g - 1) / g * g; }

}  // namespace

const KernelResources* CodeObjectInfo::Find(std::string_view name) const {
  for (const KernelResources& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

absl::StatusOr<nlohmann::json> DecodeMsgpack(std::string_view bytes) {
  Msgpack m(bytes);
  ASSIGN_OR_RETURN(nlohmann::json v, m.Value(0));
  if (!m.AtEnd()) return Bad("metadata: bytes after the value");
  return v;
}

absl::StatusOr<CodeObjectInfo> ReadCodeObject(std::string_view bytes) {
  const Bytes b(bytes);
  ASSIGN_OR_RETURN(const Elf elf, ReadElf(b));
  CodeObjectInfo info;
  info.flags = elf.flags;
  if (elf.machine == kMachineAmdgpu) {
    info.platform = Platform::kAmd;
    info.arch = AmdgpuMachine(elf.flags);
    RETURN_IF_ERROR(ReadAmdgpu(b, elf, info));
  } else if (elf.machine == kMachineCuda) {
    info.platform = Platform::kNvidia;
    RETURN_IF_ERROR(ReadCubin(b, elf, info));
  } else {
    return Bad(StrCat("ELF machine ", elf.machine, " is neither AMDGPU (224) nor CUDA (190)"));
  }
  return info;
}

absl::Status CheckCodeObject(std::string_view bytes) { return ReadCodeObject(bytes).status(); }

int RegisterLimitedWaves(const Arch& arch, const KernelResources& k) {
  if (arch.platform == Platform::kNvidia) {
    const int max_warps =
        (arch.name == "sm_86" || arch.name == "sm_89" || arch.name == "sm_120") ? 48 : 64;
    const int per_warp = RoundUp(std::max(k.registers, 1) * 32, 256);
    return std::min(max_warps, 65536 / per_warp);
  }
  if (arch.name == "gfx908") {
    return std::min(10, 256 / RoundUp(std::max({k.registers, k.agprs, 1}), 4));
  }
  if (arch.name.starts_with("gfx9")) {  // gfx90a, gfx942, gfx950: unified VGPR file
    const int total = RoundUp(RoundUp(std::max(k.registers, 1), 4) + k.agprs, 8);
    return std::min(8, 512 / total);
  }
  const int file = k.wave_size == 32 ? 1024 : 512;  // RDNA
  return std::min(16, file / RoundUp(std::max(k.registers, 1), 8));
}

nlohmann::json KernelResourcesJson(Platform platform, const KernelResources& k) {
  nlohmann::json j = {{"name", k.name},
                      {"registers", k.registers},
                      {"static_lds_bytes", k.static_lds_bytes},
                      {"scratch_bytes", k.scratch_bytes},
                      {"wave_size", k.wave_size},
                      {"spills", k.Spills()}};
  if (platform == Platform::kAmd) {
    j["sgprs"] = k.sgprs;
    j["agprs"] = k.agprs;
    j["vgpr_spills"] = k.vgpr_spills;
    j["sgpr_spills"] = k.sgpr_spills;
    j["max_threads"] = k.max_threads;
  }
  return j;
}

}  // namespace prewarm
