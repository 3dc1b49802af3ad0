#include "prewarm/toolchain/rtc_api.h"

#include "prewarm/toolchain/kernel_sources.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<CompileOutput> RtcCompile(const RtcApi& api, const std::string& compiler_name,
                                         const CompileJob& job,
                                         const std::vector<std::string>& options) {
  ASSIGN_OR_RETURN(std::vector<KernelSource> sources, SourceClosure(job.kernel));
  // Strings the compiler reads must be NUL-terminated: copy them.
  const std::string main_text(sources[0].text);
  std::vector<std::string> header_texts, header_names;
  for (size_t i = 1; i < sources.size(); ++i) {
    header_texts.emplace_back(sources[i].text);
    header_names.emplace_back(sources[i].name);
  }
  std::vector<const char*> texts, names, opts;
  for (const std::string& t : header_texts) texts.push_back(t.c_str());
  for (const std::string& n : header_names) names.push_back(n.c_str());
  for (const std::string& o : options) opts.push_back(o.c_str());
  for (const std::string& d : job.defines) opts.push_back(d.c_str());

  RtcApi::Program prog = nullptr;
  const std::string name(job.kernel);
  int rc = api.create(&prog, main_text.c_str(), name.c_str(), static_cast<int>(texts.size()),
                      texts.data(), names.data());
  if (rc != 0) {
    return absl::InternalError(
        StrCat(compiler_name, ": cannot create program ", job.kernel, ": ", api.error_string(rc)));
  }
  rc = api.compile(prog, static_cast<int>(opts.size()), opts.data());
  CompileOutput out;
  size_t log_size = 0;
  if (api.log_size(prog, &log_size) == 0 && log_size > 1) {
    out.log.resize(log_size);
    api.log(prog, out.log.data());
    out.log.resize(log_size - 1);  // drop the NUL
  }
  if (rc != 0) {
    api.destroy(&prog);
    return absl::InternalError(StrCat(compiler_name, " failed on ", job.kernel, " for ",
                                      job.arch.name, " (", StrJoin(job.defines, " "),
                                      "): ", api.error_string(rc), "\n", out.log));
  }
  size_t code_size = 0;
  if (api.code_size(prog, &code_size) != 0 || code_size == 0) {
    api.destroy(&prog);
    return absl::InternalError(StrCat(compiler_name, " produced no code for ", job.kernel));
  }
  out.code.resize(code_size);
  api.code(prog, out.code.data());
  api.destroy(&prog);
  return out;
}

}  // namespace prewarm
