# prewarm_library(NAME name SRCS ... DEPS ...): a static library prewarm_<name> with the alias
# prewarm::<name>, our warnings, and the repository root on its include path.
function(prewarm_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(prewarm_${ARG_NAME} STATIC ${ARG_SRCS})
  add_library(prewarm::${ARG_NAME} ALIAS prewarm_${ARG_NAME})
  target_include_directories(prewarm_${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(prewarm_${ARG_NAME} PUBLIC ${ARG_DEPS} PRIVATE prewarm_warnings)
endfunction()
