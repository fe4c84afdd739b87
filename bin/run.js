#!/usr/bin/env node
import { execute } from '@oclif/core';

// Everything svc creates (the database and its WAL and SHM files, logs, run files, exports) is for the
// service's user alone, whatever umask the shell or unit gave: 0600 files, 0700 directories. The processes
// `svc serve` starts inherit it.
process.umask(0o077);

await execute({ dir: import.meta.url });
