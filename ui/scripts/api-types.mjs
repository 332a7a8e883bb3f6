// The dashboard's API types (src/api/schema.d.ts) from the OpenAPI document, by
// openapi-typescript: `node scripts/api-types.mjs openapi.json src/api/schema.d.ts`.
// One addition to its output: an integer the document bounds to a small range (a job's
// priority, -100 to 100) is the union of its values, so a client that sends a priority of
// 500 fails its type check, as the server refuses it. Wider ranges stay `number` (the
// document still states their bounds).
import { readFileSync, writeFileSync } from "node:fs";
import openapiTS, { COMMENT_HEADER, astToString } from "openapi-typescript";
import ts from "typescript";

const RANGE_AS_UNION = 256;
const [input, output] = process.argv.slice(2);

function literal(n) {
  const value = ts.factory.createNumericLiteral(Math.abs(n));
  return ts.factory.createLiteralTypeNode(
    n < 0 ? ts.factory.createPrefixUnaryExpression(ts.SyntaxKind.MinusToken, value) : value,
  );
}

const ast = await openapiTS(JSON.parse(readFileSync(input, "utf8")), {
  transform(schema) {
    const { type, minimum: low, maximum: high } = schema;
    if (type !== "integer" || !Number.isInteger(low) || !Number.isInteger(high)) return undefined;
    if (high - low >= RANGE_AS_UNION) return undefined;
    const values = [];
    for (let n = low; n <= high; n += 1) values.push(literal(n));
    return ts.factory.createUnionTypeNode(values);
  },
});
writeFileSync(output, COMMENT_HEADER + astToString(ast));
