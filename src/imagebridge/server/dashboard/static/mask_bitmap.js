// The painted mask as data, free of the DOM: one byte per source pixel (1 = may change),
// round brush stamps along a stroke, undo and redo by rectangles, invert and clear, and the
// RGBA the API expects.
//
// The bridge's rule (docs/api-decisions.md; imaging/masks.py): a mask has the first image's
// exact size, and its transparent pixels (alpha below 255) mark where the image may change,
// opaque ones what is kept. The painted pixels become alpha 0, the rest alpha 255, all black.
// Stamps are exact discs (a pixel is in when its centre is within the radius), so the mask
// sent is the painted region, not an anti-aliased approximation of it.

export const MAX_UNDO = 50;

export class MaskBitmap {
  constructor(width, height) {
    this.width = width;
    this.height = height;
    this.data = new Uint8Array(width * height);
    this.undos = [];
    this.redos = [];
    this.before = null;
    this.box = null;
  }

  /** How many pixels may change. */
  count() {
    let total = 0;
    for (let i = 0; i < this.data.length; i += 1) total += this.data[i];
    return total;
  }

  grow(x0, y0, x1, y1) {
    const box = this.box;
    this.box = box ? { x0: Math.min(box.x0, x0), y0: Math.min(box.y0, y0), x1: Math.max(box.x1, x1), y1: Math.max(box.y1, y1) } : { x0, y0, x1, y1 };
  }

  begin() {
    this.before = this.data.slice();
    this.box = null;
  }

  /** A disc of `radius` image pixels centred on (cx, cy); `value` 1 paints, 0 erases.
   *  Returns the rectangle it touched ({x0, y0, x1, y1}, x1/y1 exclusive) or null. */
  stamp(cx, cy, radius, value) {
    const x0 = Math.max(0, Math.floor(cx - radius));
    const y0 = Math.max(0, Math.floor(cy - radius));
    const x1 = Math.min(this.width, Math.ceil(cx + radius) + 1);
    const y1 = Math.min(this.height, Math.ceil(cy + radius) + 1);
    if (x0 >= x1 || y0 >= y1) return null;
    const limit = radius * radius;
    for (let y = y0; y < y1; y += 1) {
      const dy = y + 0.5 - cy;
      const row = y * this.width;
      for (let x = x0; x < x1; x += 1) {
        const dx = x + 0.5 - cx;
        if (dx * dx + dy * dy <= limit) this.data[row + x] = value;
      }
    }
    this.grow(x0, y0, x1, y1);
    return { x0, y0, x1, y1 };
  }

  /** Stamps from (ax, ay) to (bx, by), close enough that the union is the stroke's band. */
  line(ax, ay, bx, by, radius, value) {
    const length = Math.hypot(bx - ax, by - ay);
    const spacing = Math.max(0.5, radius / 4);
    const steps = Math.max(1, Math.ceil(length / spacing));
    let touched = null;
    for (let i = 1; i <= steps; i += 1) {
      const t = i / steps;
      const box = this.stamp(ax + (bx - ax) * t, ay + (by - ay) * t, radius, value);
      if (box) touched = touched ? { x0: Math.min(touched.x0, box.x0), y0: Math.min(touched.y0, box.y0), x1: Math.max(touched.x1, box.x1), y1: Math.max(touched.y1, box.y1) } : box;
    }
    return touched;
  }

  /** Close the stroke (or the whole-image change) begun with begin(): one undo step. */
  end() {
    const box = this.box;
    const before = this.before;
    this.before = null;
    this.box = null;
    if (!box || !before) return;
    const patch = { ...box, before: this.crop(before, box), after: this.crop(this.data, box) };
    if (patch.before.every((value, index) => value === patch.after[index])) return;
    this.undos.push(patch);
    if (this.undos.length > MAX_UNDO) this.undos.shift();
    this.redos = [];
  }

  crop(source, box) {
    const width = box.x1 - box.x0;
    const out = new Uint8Array(width * (box.y1 - box.y0));
    for (let y = box.y0; y < box.y1; y += 1) out.set(source.subarray(y * this.width + box.x0, y * this.width + box.x1), (y - box.y0) * width);
    return out;
  }

  paste(values, box) {
    const width = box.x1 - box.x0;
    for (let y = box.y0; y < box.y1; y += 1) this.data.set(values.subarray((y - box.y0) * width, (y - box.y0 + 1) * width), y * this.width + box.x0);
  }

  whole(change) {
    this.begin();
    change();
    this.grow(0, 0, this.width, this.height);
    this.end();
  }

  clear() {
    this.whole(() => this.data.fill(0));
  }

  invert() {
    this.whole(() => {
      for (let i = 0; i < this.data.length; i += 1) this.data[i] = 1 - this.data[i];
    });
  }

  /** Undo (or redo) one step; the rectangle it changed, or null when there was none. */
  undo() {
    const patch = this.undos.pop();
    if (!patch) return null;
    this.paste(patch.before, patch);
    this.redos.push(patch);
    return patch;
  }

  redo() {
    const patch = this.redos.pop();
    if (!patch) return null;
    this.paste(patch.after, patch);
    this.undos.push(patch);
    return patch;
  }

  /** The mask the API takes, as RGBA pixels: black, transparent where the image may change. */
  toRGBA() {
    const pixels = new Uint8ClampedArray(this.width * this.height * 4);
    for (let i = 0; i < this.data.length; i += 1) pixels[i * 4 + 3] = this.data[i] ? 0 : 255;
    return pixels;
  }

  /** Paint `box` of an overlay ImageData of the same size: `color` where the image may change. */
  drawOverlay(image, box, color) {
    const [r, g, b] = color;
    for (let y = box.y0; y < box.y1; y += 1) {
      for (let x = box.x0; x < box.x1; x += 1) {
        const i = y * this.width + x;
        const o = i * 4;
        const on = this.data[i] === 1;
        image.data[o] = r;
        image.data[o + 1] = g;
        image.data[o + 2] = b;
        image.data[o + 3] = on ? 255 : 0;
      }
    }
  }
}
