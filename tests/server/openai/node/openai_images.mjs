// Generates and edits through the bridge with the official Node `openai` SDK at its default
// retries (maxRetries 2), and prints what it decoded as one JSON line per request.
// argv: <path to the openai package> <bridge /v1 URL> <api key> <edit source PNG path>
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, baseURL, apiKey, sourcePath] = process.argv.slice(2);
const entry = pathToFileURL(path.join(packageDir, "index.mjs")).href;
const { default: OpenAI, toFile } = await import(entry);
const client = new OpenAI({ baseURL, apiKey });

function summary(response) {
  return {
    count: response.data.length,
    png: response.data.every(
      (item) => Buffer.from(item.b64_json, "base64").subarray(1, 4).toString("latin1") === "PNG",
    ),
    size: response.size,
    output_format: response.output_format,
    text_tokens: response.usage?.input_tokens_details?.text_tokens ?? null,
    image_tokens: response.usage?.output_tokens_details?.image_tokens ?? null,
    model: response.imagegen_bridge?.model ?? null,
  };
}

async function attempt(request, call) {
  try {
    console.log(JSON.stringify({ request, ...summary(await call()) }));
  } catch (error) {
    console.log(
      JSON.stringify({ request, status: error.status ?? null, param: error.param ?? null }),
    );
  }
}

await attempt("generate", () =>
  client.images.generate({ model: "gpt-image-2", prompt: "a node fox", n: 2, size: "48x32" }),
);
await attempt("edit-file", async () =>
  client.images.edit({
    model: "gpt-image-2",
    image: fs.createReadStream(sourcePath),
    prompt: "make it node green",
    size: "64x64",
  }),
);
await attempt("edit-buffer", async () =>
  client.images.edit({
    model: "gpt-image-2",
    image: await toFile(fs.readFileSync(sourcePath)),
    prompt: "a buffer with no name or type",
  }),
);
await attempt("transparent-jpeg", () =>
  client.images.generate({
    prompt: "a glass fox",
    size: "32x32",
    background: "transparent",
    output_format: "jpeg",
  }),
);
await attempt("upstream-5xx", () =>
  client.images.generate({ prompt: "[mock:fail=upstream] fox", size: "32x32" }),
);
const models = await client.models.list();
console.log(JSON.stringify({ request: "models", ids: models.data.map((model) => model.id) }));
