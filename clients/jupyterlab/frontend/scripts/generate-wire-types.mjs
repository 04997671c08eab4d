// Generates src/wire.ts, the TypeScript types of every wire message, from
// protocol/schema.json (the schema `make schema` writes from the Python types).
//
//   node scripts/generate-wire-types.mjs          write src/wire.ts
//   node scripts/generate-wire-types.mjs --check  exit 1 when src/wire.ts is stale
//
// tests/jupyterlab/test_wire_types.py runs the check, as tests/protocol checks
// schema.json itself.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compile } from 'json-schema-to-typescript';

const here = dirname(fileURLToPath(import.meta.url));
const schemaPath = join(here, '..', '..', '..', '..', 'protocol', 'schema.json');
const outPath = join(here, '..', 'src', 'wire.ts');

const BANNER = `/* eslint-disable */
/**
 * The hdsp wire protocol's types, generated from protocol/schema.json by
 * scripts/generate-wire-types.mjs (npm run generate:types). Do not edit by hand:
 * change the Python types, run \`make schema\`, then \`make wire-types\`.
 */`;

// json-schema-to-typescript reads draft-07: 2020-12's `$defs` become
// `definitions` and its tuples (`prefixItems`, `items: false`) draft-07 tuples.
function toDraft07(node) {
  if (Array.isArray(node)) {
    return node.map(toDraft07);
  }
  if (node === null || typeof node !== 'object') {
    return node;
  }
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$ref' && typeof value === 'string') {
      out.$ref = value.replace('#/$defs/', '#/definitions/');
    } else if (key === '$defs') {
      out.definitions = toDraft07(value);
    } else if (key === 'prefixItems') {
      out.items = toDraft07(value);
      out.additionalItems = false;
    } else if (key === 'items' && 'prefixItems' in node) {
      continue; // `items: false` after prefixItems: no further items
    } else if (key === '$schema') {
      continue;
    } else {
      out[key] = toDraft07(value);
    }
  }
  return out;
}

export async function generate() {
  const wire = toDraft07(JSON.parse(readFileSync(schemaPath, 'utf8')));
  // Every definition becomes a named, exported type: the root lists them all
  // (HdspWire: an index by name, not a message), and HdspFrame is the schema's
  // own root (any frame, either direction).
  const definitions = {
    ...wire.definitions,
    HdspFrame: { title: 'HdspFrame', description: wire.description, oneOf: wire.oneOf }
  };
  const names = Object.keys(definitions).sort();
  const root = {
    title: 'HdspWire',
    description: 'Every type of the wire by its name in schema.json (an index, not a message).',
    type: 'object',
    properties: Object.fromEntries(names.map(n => [n, { $ref: `#/definitions/${n}` }])),
    required: names,
    additionalProperties: false,
    definitions
  };
  return compile(root, 'HdspWire', {
    bannerComment: BANNER,
    additionalProperties: false,
    declareExternallyReferenced: true,
    strictIndexSignatures: true,
    enableConstEnums: false,
    style: { singleQuote: true, trailingComma: 'none' }
  });
}

const text = await generate();
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(outPath, 'utf8');
  } catch {
    current = '';
  }
  if (current !== text) {
    process.stderr.write(
      'clients/jupyterlab/frontend/src/wire.ts is stale: run `make wire-types` and commit it\n'
    );
    process.exit(1);
  }
} else {
  writeFileSync(outPath, text);
}
