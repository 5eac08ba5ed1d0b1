#ifndef CPOSTGRES_SHIM_H
#define CPOSTGRES_SHIM_H

// libpq (Debian libpq-dev, PostgreSQL 15's client library) for Swift: its header as it is; every
// libpq call is in Sources/TagFixPostgres/Postgres.swift.
#include <libpq-fe.h>

#endif
