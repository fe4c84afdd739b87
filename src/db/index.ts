export * from './database.js';
export * from './errors.js';
export * from './migrations.js';
