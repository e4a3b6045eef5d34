// Streams generate and edit from the bridge with the official Node `openai` SDK, and prints
// what its async iterators yielded as one JSON line per request (the test checks it).
// argv: <path to the openai package> <bridge /v1 URL> <api key> <edit source PNG path>
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, baseURL, apiKey, sourcePath] = process.argv.slice(2);
const entry = pathToFileURL(path.join(packageDir, "index.mjs")).href;
const { default: OpenAI, toFile } = await import(entry);
const client = new OpenAI({ baseURL, apiKey });

function summary(event) {
  return {
    type: event.type,
    partial_image_index: event.partial_image_index ?? null,
    index: event.imagegen_bridge?.index ?? null,
    size: event.size,
    output_format: event.output_format,
    png: Buffer.from(event.b64_json, "base64").subarray(1, 4).toString("latin1") === "PNG",
    total_tokens: event.usage?.total_tokens ?? null,
  };
}

async function collect(stream) {
  const events = [];
  for await (const event of stream) events.push(summary(event));
  return events;
}

const generated = await client.images.generate({
  model: "gpt-image-1",
  prompt: "a node streamed fox",
  size: "64x64",
  n: 2,
  stream: true,
  partial_images: 2,
});
console.log(JSON.stringify({ request: "generate", events: await collect(generated) }));

const edited = await client.images.edit({
  model: "gpt-image-1",
  image: await toFile(fs.createReadStream(sourcePath), "source.png", { type: "image/png" }),
  prompt: "make it node green",
  size: "64x64",
  stream: true,
  partial_images: 1,
});
console.log(JSON.stringify({ request: "edit", events: await collect(edited) }));

try {
  const failing = await client.images.generate({
    model: "gpt-image-1",
    prompt: "[mock:fail-output=0] fails after previews",
    size: "64x64",
    stream: true,
    partial_images: 1,
  });
  const seen = [];
  for await (const event of failing) seen.push(event.type);
  console.log(JSON.stringify({ request: "failing", events: seen, error: null }));
} catch (error) {
  console.log(
    JSON.stringify({ request: "failing", error: error.constructor.name, status: error.status ?? null })
  );
}
