/* A stand-in libnvrtc.so.13 for toolchain_identity_test: it loads, and has every entry point
 * prewarm looks up, but its nvrtcVersion fails (a damaged or mismatched NVRTC install). prewarm
 * must refuse it naming the file, never name its entries "nvrtc 0.0". */
int nvrtcVersion(int* major, int* minor) {
  (void)major;
  (void)minor;
  return 7; /* NVRTC_ERROR_BUILTIN_OPERATION_FAILURE */
}
int nvrtcGetNumSupportedArchs(int* n) {
  *n = 1;
  return 0;
}
int nvrtcGetSupportedArchs(int* archs) {
  archs[0] = 90;
  return 0;
}
int nvrtcCreateProgram(void) { return 7; }
int nvrtcCompileProgram(void) { return 7; }
int nvrtcGetProgramLogSize(void) { return 7; }
int nvrtcGetProgramLog(void) { return 7; }
int nvrtcGetCUBINSize(void) { return 7; }
int nvrtcGetCUBIN(void) { return 7; }
int nvrtcDestroyProgram(void) { return 7; }
const char* nvrtcGetErrorString(int rc) {
  (void)rc;
  return "broken";
}
