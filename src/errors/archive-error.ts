/**
 * Why a backup archive was refused: it is not one of ours, or it was cut short or altered. Here, not in
 * `backup/`, because the database's restore (`db/restore-data.ts`) refuses archives too and the ground floor
 * imports nothing above it.
 */
export class ArchiveError extends Error {
  override name = 'ArchiveError';
}
