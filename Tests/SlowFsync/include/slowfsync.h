// See slowfsync.c: fsync and fdatasync, made slow off RAM file systems, for LD_PRELOAD.
#ifndef TAGFIX_SLOWFSYNC_H
#define TAGFIX_SLOWFSYNC_H
int fsync(int fd);
int fdatasync(int fd);
#endif
