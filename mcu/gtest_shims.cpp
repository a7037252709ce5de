// What GoogleTest needs from POSIX and newlib lacks on bare metal: there is no file system, so the current
// directory is unknown and no directory can be made (GoogleTest only makes one for XML output, unused here).
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>

extern "C" char* getcwd(char*, std::size_t) {
  errno = ENOSYS;
  return nullptr;
}

extern "C" int mkdir(const char*, mode_t) {
  errno = ENOSYS;
  return -1;
}
