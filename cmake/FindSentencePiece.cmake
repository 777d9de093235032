# FindSentencePiece: Google's SentencePiece library (the processor, libsentencepiece) as the
# imported target SentencePiece::SentencePiece, found through its pkg-config file (Debian's
# libsentencepiece-dev installs sentencepiece.pc), else under SentencePiece_ROOT and the system
# paths. Sets SentencePiece_FOUND, SentencePiece_VERSION, SentencePiece_LIBRARY and
# SentencePiece_INCLUDE_DIR. Only the processor is linked: ptrain encodes, it does not train.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_SentencePiece QUIET sentencepiece)
endif()
find_path(SentencePiece_INCLUDE_DIR sentencepiece_processor.h HINTS ${PC_SentencePiece_INCLUDE_DIRS})
find_library(SentencePiece_LIBRARY sentencepiece HINTS ${PC_SentencePiece_LIBRARY_DIRS})
set(SentencePiece_VERSION ${PC_SentencePiece_VERSION})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SentencePiece REQUIRED_VARS SentencePiece_LIBRARY SentencePiece_INCLUDE_DIR
                                  VERSION_VAR SentencePiece_VERSION)
if(SentencePiece_FOUND AND NOT TARGET SentencePiece::SentencePiece)
  add_library(SentencePiece::SentencePiece UNKNOWN IMPORTED)
  set_target_properties(SentencePiece::SentencePiece PROPERTIES
                        IMPORTED_LOCATION "${SentencePiece_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${SentencePiece_INCLUDE_DIR}")
endif()
mark_as_advanced(SentencePiece_INCLUDE_DIR SentencePiece_LIBRARY)
