// Byte-level helpers, free of the DOM: sizes for people, UTF-8 lengths, the image type of
// a file's first bytes, and file names the bridge accepts.

export function utf8Length(text) {
  return new TextEncoder().encode(String(text)).length;
}

export function formatBytes(bytes) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} ${units[unit]}` : `${value.toFixed(value >= 10 ? 0 : 1)} ${units[unit]}`;
}

/** The image type of the first bytes of a file, or "" when not PNG, JPEG or WebP. */
export function sniffImageType(bytes) {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47 && b[4] === 0x0d && b[5] === 0x0a && b[6] === 0x1a && b[7] === 0x0a) return "image/png";
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (b.length >= 12 && b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50) return "image/webp";
  return "";
}

/** A file name the bridge accepts as an input's logical filename (no separators or controls). */
export function safeFilename(name) {
  // eslint-disable-next-line no-control-regex -- control characters are what it removes
  const cleaned = String(name || "").replace(/[\\/]/g, "_").replace(/[\u0000-\u001f\u007f-\u009f]/g, "").trim();
  return cleaned.slice(0, 255);
}
