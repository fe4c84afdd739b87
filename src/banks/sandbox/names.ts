import { rutCheckDigit } from '../../rut/rut.js';
import type { Rng } from './prng.js';

/**
 * Word lists for plausible Chilean people, companies and merchants. Only the order of these lists is
 * part of the sandbox's determinism: editing one changes the names (never the amounts or dates) of
 * every sandbox holder, so append rather than reorder.
 */
const FIRST_NAMES = [
  'María José',
  'Camila',
  'Valentina',
  'Francisca',
  'Javiera',
  'Catalina',
  'Constanza',
  'Fernanda',
  'Daniela',
  'Carolina',
  'Isidora',
  'Antonia',
  'Sofía',
  'Paula',
  'Macarena',
  'Juan Pablo',
  'Matías',
  'Sebastián',
  'Benjamín',
  'Diego',
  'Felipe',
  'Cristóbal',
  'Nicolás',
  'Tomás',
  'Joaquín',
  'Ignacio',
  'Rodrigo',
  'Francisco',
  'Vicente',
  'José Miguel',
  'Andrés',
  'Gonzalo',
] as const;

const SURNAMES = [
  'González',
  'Muñoz',
  'Rojas',
  'Díaz',
  'Pérez',
  'Soto',
  'Contreras',
  'Silva',
  'Martínez',
  'Sepúlveda',
  'Morales',
  'Rodríguez',
  'López',
  'Fuentes',
  'Hernández',
  'Torres',
  'Araya',
  'Flores',
  'Espinoza',
  'Valenzuela',
  'Castillo',
  'Tapia',
  'Reyes',
  'Gutiérrez',
  'Castro',
  'Pizarro',
  'Álvarez',
  'Vásquez',
  'Sánchez',
  'Fernández',
  'Ramírez',
  'Carrasco',
  'Cortés',
  'Herrera',
  'Núñez',
  'Jara',
  'Vergara',
  'Rivera',
] as const;

const COMPANY_KINDS = [
  'Comercial',
  'Inversiones',
  'Servicios',
  'Distribuidora',
  'Constructora',
  'Transportes',
  'Agrícola',
  'Importadora',
  'Ingeniería',
  'Consultora',
  'Alimentos',
  'Exportadora',
] as const;

const COMPANY_NAMES = [
  'Los Andes',
  'del Pacífico',
  'Cordillera',
  'Austral',
  'San Cristóbal',
  'Biobío',
  'Atacama',
  'Valle Central',
  'Puerto Claro',
  'Mar Azul',
  'Las Condes',
  'Patagonia',
  'Llanquihue',
  'El Roble',
  'Tres Montes',
  'La Araucanía',
  'Maipo',
  'Costa Norte',
] as const;

const COMPANY_FORMS = ['SpA', 'Ltda.', 'S.A.', 'EIRL'] as const;

export interface Merchant {
  name: string;
  /** Amount range in CLP for a spending scale of 1 (a salary of about 1.8 million). */
  min: number;
  max: number;
}

export const MERCHANTS: readonly Merchant[] = [
  { name: 'LIDER', min: 8_000, max: 90_000 },
  { name: 'JUMBO', min: 10_000, max: 120_000 },
  { name: 'UNIMARC', min: 5_000, max: 60_000 },
  { name: 'SANTA ISABEL', min: 5_000, max: 50_000 },
  { name: 'TOTTUS', min: 8_000, max: 80_000 },
  { name: 'COPEC', min: 20_000, max: 60_000 },
  { name: 'SHELL', min: 20_000, max: 60_000 },
  { name: 'STARBUCKS', min: 3_500, max: 12_000 },
  { name: 'JUAN MAESTRO', min: 6_000, max: 18_000 },
  { name: 'RAPPI', min: 8_000, max: 35_000 },
  { name: 'PEDIDOSYA', min: 8_000, max: 30_000 },
  { name: 'UBER', min: 3_000, max: 15_000 },
  { name: 'CABIFY', min: 3_500, max: 16_000 },
  { name: 'NETFLIX.COM', min: 7_000, max: 12_000 },
  { name: 'SPOTIFY', min: 4_500, max: 7_500 },
  { name: 'FALABELLA', min: 15_000, max: 150_000 },
  { name: 'PARIS', min: 12_000, max: 120_000 },
  { name: 'SODIMAC', min: 10_000, max: 140_000 },
  { name: 'MERCADOLIBRE', min: 8_000, max: 110_000 },
  { name: 'CRUZ VERDE', min: 3_000, max: 40_000 },
  { name: 'SALCOBRAND', min: 3_000, max: 35_000 },
];

export const CITIES = [
  'SANTIAGO',
  'PROVIDENCIA',
  'LAS CONDES',
  'NUNOA',
  'VINA DEL MAR',
  'CONCEPCION',
  'MAIPU',
] as const;

export const FOREIGN_MERCHANTS = [
  'AMAZON.COM',
  'APPLE.COM/BILL',
  'GOOGLE *CLOUD',
  'AIRBNB',
  'BOOKING.COM',
] as const;

export const INSURERS = [
  'SEGUROS SURA',
  'BCI SEGUROS',
  'METLIFE',
  'HDI SEGUROS',
  'CONSORCIO SEGUROS',
] as const;

export function personName(rng: Rng): string {
  const paternal = rng.pick(SURNAMES);
  let maternal = rng.pick(SURNAMES);
  if (maternal === paternal) maternal = rng.pick(SURNAMES);
  return `${rng.pick(FIRST_NAMES)} ${paternal} ${maternal}`;
}

export function companyName(rng: Rng): string {
  return `${rng.pick(COMPANY_KINDS)} ${rng.pick(COMPANY_NAMES)} ${rng.pick(COMPANY_FORMS)}`;
}

/** A valid normalised RUT (`12345678-5`) with a body in [min, max]. */
export function makeRut(rng: Rng, min: number, max: number): string {
  const body = String(rng.int(min, max));
  return `${body}-${rutCheckDigit(body)}`;
}

/** People's RUTs run from about 5 to 25 million; companies' start at 76 million. */
export const personRut = (rng: Rng): string => makeRut(rng, 5_000_000, 25_999_999);
export const companyRut = (rng: Rng): string => makeRut(rng, 76_000_000, 77_999_999);
