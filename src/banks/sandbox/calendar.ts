/**
 * Calendar arithmetic on UTC days, without Date objects (the generator asks for a day's month and date
 * several times per generated day, and `Date` parsing was a third of its run time). The sandbox works in
 * UTC throughout: a "day" is a UTC calendar day and a "working day" is Monday to Friday (no public
 * holidays), so results never depend on the host's time zone.
 */
export const DAY_MS = 86_400_000;

/** Days since 1970-01-01 (UTC) of an instant. */
export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

export function dayStart(day: number): number {
  return day * DAY_MS;
}

export interface CivilDate {
  year: number;
  /** 1..12 */
  month: number;
  /** 1..31 */
  date: number;
}

/** Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day number. */
export function civilDate(day: number): CivilDate {
  const z = day + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1_460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const date = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, date };
}

/** Howard Hinnant's `days_from_civil`. */
export function dayFromCivil(year: number, month: number, date: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + date - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** `YYYY-MM-DD` of a day. */
export function isoDate(day: number): string {
  const { year, month, date } = civilDate(day);
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(date, 2)}`;
}

/** 0 = Sunday ... 6 = Saturday (1970-01-01 was a Thursday). */
export function weekday(day: number): number {
  return (((day + 4) % 7) + 7) % 7;
}

export function isWorkingDay(day: number): boolean {
  const w = weekday(day);
  return w !== 0 && w !== 6;
}

/** Months since January 1970 (0 = 1970-01). */
export function monthOf(day: number): number {
  const { year, month } = civilDate(day);
  return (year - 1970) * 12 + month - 1;
}

/** 1..31. */
export function dayOfMonth(day: number): number {
  return civilDate(day).date;
}

export function firstDayOfMonth(month: number): number {
  return dayFromCivil(1970 + Math.floor(month / 12), (((month % 12) + 12) % 12) + 1, 1);
}

/** The last Monday-to-Friday day of the month: the last day, or the Friday before it on a weekend. */
export function lastWorkingDayOfMonth(month: number): number {
  let day = firstDayOfMonth(month + 1) - 1;
  while (!isWorkingDay(day)) day -= 1;
  return day;
}
