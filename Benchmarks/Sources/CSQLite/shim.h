// The system SQLite C API, for the SQLite rows of kura-bench.
#include <sqlite3.h>
