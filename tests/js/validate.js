// Compiles protocol/schema.json with ajv in strict mode and validates values
// against the types it names. Reads {"schema": PATH, "cases": [{"id", "ref",
// "value"}]} on stdin, where `ref` is a pointer into the schema ("#/$defs/Ack");
// writes {"strict": null | ERROR, "results": {ID: null | [ERRORS]}} on stdout.
"use strict";
const fs = require("fs");
const Ajv2020 = require("ajv/dist/2020");

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const schema = JSON.parse(fs.readFileSync(input.schema, "utf8"));
const out = { strict: null, results: {} };

const ajv = new Ajv2020({ strict: true, allErrors: true });
try {
  ajv.compile(schema);
} catch (err) {
  out.strict = String(err.message || err);
}

const cases = new Ajv2020({ strict: true, allErrors: true });
const validators = new Map();
function validatorFor(ref) {
  if (!validators.has(ref)) {
    // The root, pointed at one type: its $defs resolve as in the whole schema.
    const pointed = { $schema: schema.$schema, $defs: schema.$defs, $ref: ref };
    validators.set(ref, cases.compile(pointed));
  }
  return validators.get(ref);
}

for (const c of input.cases) {
  try {
    const validate = validatorFor(c.ref);
    out.results[c.id] = validate(c.value) ? null : validate.errors;
  } catch (err) {
    out.results[c.id] = [{ message: String(err.message || err) }];
  }
}
process.stdout.write(JSON.stringify(out));
