// Which gallery tiles are selected: a set of entry keys with an anchor for shift-ranges.
//
// A plain model that tells its listeners ("change") when it changes; the grid draws it and
// bulk.js acts on it. Keys of entries that left the gallery are dropped by `keep()`.

class Selection extends EventTarget {
  constructor() {
    super();
    this.keys = new Set();
    this.anchor = null;
  }

  get size() {
    return this.keys.size;
  }

  has(key) {
    return this.keys.has(key);
  }

  changed() {
    this.dispatchEvent(new Event("change"));
  }

  /** Select or unselect one key; it becomes the anchor of the next range. */
  toggle(key) {
    if (this.keys.has(key)) this.keys.delete(key);
    else this.keys.add(key);
    this.anchor = key;
    this.changed();
  }

  /** Select every key from the anchor to `key` in `order` (the gallery's keys in order). */
  extend(key, order) {
    const from = this.anchor === null ? -1 : order.indexOf(this.anchor);
    const to = order.indexOf(key);
    if (to < 0) return;
    if (from < 0) {
      this.toggle(key);
      return;
    }
    const [start, end] = from <= to ? [from, to] : [to, from];
    for (const item of order.slice(start, end + 1)) this.keys.add(item);
    this.anchor = key;
    this.changed();
  }

  clear() {
    if (!this.keys.size && this.anchor === null) return;
    this.keys.clear();
    this.anchor = null;
    this.changed();
  }

  /** Forget keys that are no longer shown. */
  keep(shown) {
    let dropped = false;
    for (const key of [...this.keys]) {
      if (!shown.has(key)) {
        this.keys.delete(key);
        dropped = true;
      }
    }
    if (this.anchor !== null && !shown.has(this.anchor)) this.anchor = null;
    if (dropped) this.changed();
  }
}

export const selection = new Selection();
