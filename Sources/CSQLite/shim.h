#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

// SQLite 3 (Debian libsqlite3-dev 3.40) for Swift. Only what Swift cannot use directly is
// wrapped; every helper says why it exists.
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a macro that casts -1 to a destructor pointer, which Swift cannot import:
/// binds a copy of `text` (`length` bytes of UTF-8), so the caller's buffer may go away at once.
static inline int csqlite_bind_text(sqlite3_stmt *_Nonnull statement, int index, const char *_Nonnull text, int length) {
    return sqlite3_bind_text(statement, index, text, length, SQLITE_TRANSIENT);
}

#endif
