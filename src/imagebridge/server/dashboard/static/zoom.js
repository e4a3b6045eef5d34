// Zoom and pan over one or more stages kept in step (the lightbox has one; compare has two,
// or two layers of one slider): the wheel or +/− zoom at a point, a drag pans, two fingers
// pinch, a double click toggles between fitting and 2×. At the fitted size a sideways swipe
// is a "swipe" event (detail: -1 leftwards, 1 rightwards) for the lightbox to step.
//
// Each stage is an element with overflow hidden holding `.zoom-layer` children that fill it;
// the image inside a layer fits it (object-fit: contain). Zooming scales the layers with a
// CSS transform set through the CSSOM (the page's CSP forbids style attributes, not this).

const MIN_SCALE = 1;
const MAX_SCALE = 16;
const STEP = 1.25;
const SWIPE_PX = 60;

export class ZoomPan extends EventTarget {
  constructor(stages) {
    super();
    this.stages = stages;
    this.scale = 1;
    this.x = 0;
    this.y = 0;
    this.pointers = new Map();
    this.pinch = null;
    this.start = null;
    for (const stage of stages) this.attach(stage);
  }

  layers() {
    return this.stages.flatMap((stage) => [...stage.querySelectorAll(".zoom-layer")]);
  }

  size() {
    const rect = this.stages[0].getBoundingClientRect();
    return { width: rect.width, height: rect.height };
  }

  /** Fit the image to its stage again. */
  reset() {
    this.scale = 1;
    this.x = 0;
    this.y = 0;
    this.apply();
  }

  /** Zoom by `factor` keeping the stage point (px, py) where it is (default: the centre). */
  zoomBy(factor, px, py) {
    const { width, height } = this.size();
    const cx = px ?? width / 2;
    const cy = py ?? height / 2;
    const scale = Math.min(MAX_SCALE, Math.max(MIN_SCALE, this.scale * factor));
    const ratio = scale / this.scale;
    this.x = cx - (cx - this.x) * ratio;
    this.y = cy - (cy - this.y) * ratio;
    this.scale = scale;
    this.apply();
  }

  panBy(dx, dy) {
    this.x += dx;
    this.y += dy;
    this.apply();
  }

  clamp() {
    const { width, height } = this.size();
    this.x = Math.min(0, Math.max(width - width * this.scale, this.x));
    this.y = Math.min(0, Math.max(height - height * this.scale, this.y));
  }

  apply() {
    this.clamp();
    const transform = this.scale === 1 ? "" : `translate(${this.x}px, ${this.y}px) scale(${this.scale})`;
    for (const layer of this.layers()) layer.style.transform = transform;
    for (const stage of this.stages) stage.classList.toggle("zoomed", this.scale > 1);
    this.dispatchEvent(new Event("change"));
  }

  /** The zoom as people read it: "Fit", or a multiple of fitting. */
  label() {
    return this.scale === 1 ? "Fit" : `${Math.round(this.scale * 100)}%`;
  }

  attach(stage) {
    stage.addEventListener("wheel", (event) => {
      event.preventDefault();
      const rect = stage.getBoundingClientRect();
      this.zoomBy(event.deltaY < 0 ? STEP : 1 / STEP, event.clientX - rect.left, event.clientY - rect.top);
    }, { passive: false });
    stage.addEventListener("dblclick", (event) => {
      const rect = stage.getBoundingClientRect();
      if (this.scale > 1) this.reset();
      else this.zoomBy(2, event.clientX - rect.left, event.clientY - rect.top);
    });
    stage.addEventListener("pointerdown", (event) => {
      if (event.button !== 0 && event.pointerType === "mouse") return;
      stage.setPointerCapture(event.pointerId);
      this.pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
      this.start = this.pointers.size === 1 ? { x: event.clientX, y: event.clientY } : null;
      if (this.pointers.size === 2) this.pinch = this.spread();
    });
    stage.addEventListener("pointermove", (event) => {
      const last = this.pointers.get(event.pointerId);
      if (!last) return;
      const now = { x: event.clientX, y: event.clientY };
      this.pointers.set(event.pointerId, now);
      if (this.pointers.size === 2 && this.pinch) {
        const spread = this.spread();
        const rect = stage.getBoundingClientRect();
        this.zoomBy(spread.distance / this.pinch.distance, spread.x - rect.left, spread.y - rect.top);
        this.pinch = spread;
      } else if (this.pointers.size === 1 && this.scale > 1) {
        this.panBy(now.x - last.x, now.y - last.y);
      }
    });
    const end = (event) => {
      this.pointers.delete(event.pointerId);
      if (this.pointers.size < 2) this.pinch = null;
    };
    stage.addEventListener("pointerup", (event) => {
      const start = this.start;
      this.start = null;
      end(event);
      if (!start || this.scale > 1 || this.pointers.size) return;
      const dx = event.clientX - start.x;
      if (Math.abs(dx) > SWIPE_PX && Math.abs(dx) > 2 * Math.abs(event.clientY - start.y)) {
        this.dispatchEvent(new CustomEvent("swipe", { detail: dx < 0 ? -1 : 1 }));
      }
    });
    stage.addEventListener("pointercancel", end);
  }

  spread() {
    const [a, b] = [...this.pointers.values()];
    return { distance: Math.max(1, Math.hypot(a.x - b.x, a.y - b.y)), x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
  }

  /** +, − and 0 from the keyboard; true when the key was one of them. */
  key(event) {
    if (event.key === "+" || event.key === "=") this.zoomBy(STEP);
    else if (event.key === "-" || event.key === "_") this.zoomBy(1 / STEP);
    else if (event.key === "0") this.reset();
    else return false;
    return true;
  }
}
