/**
 * A database URL as it may be printed: its password (`//user:pw@`, `//:pw@`, or a `password=` query
 * parameter, which the driver also takes) replaced by `****`. Here with the database, not the configuration,
 * because snapshots and restores print URLs too and the ground floor imports nothing above it.
 */
export function maskUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*):[^@]*@/, '$1:****@').replace(/([?&]password=)[^&#]*/gi, '$1****');
}
