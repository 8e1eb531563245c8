// What a page painted as text on its canvases (uPlot's axes, the map's
// labels), recorded by the browser itself: an init script wraps
// CanvasRenderingContext2D's fillText and keeps, per canvas, each string
// with its colour (fillStyle as the canvas normalised it) and its box in
// canvas pixels (measureText's actual bounds around the
// point drawn at, through the context's transform, so rotated labels
// count as drawn, marked rotated), and the fillStyle of each path it
// fills (fill(): the boxes under labels); a clearRect of the whole canvas
// starts both lists again.
// The tests read the boxes to check labels for overlap and clipping
// without trusting the page's own account of them, and compare the colours
// (rgb, sameColor, contrast below).

/** Installs the recorder in every page of the context (before any script). */
export function recordCanvasText(context) {
  return context.addInitScript(() => {
    const P = CanvasRenderingContext2D.prototype;
    const fill = P.fillText;
    const fillPath = P.fill;
    const clear = P.clearRect;
    P.clearRect = function (x, y, w, h) {
      const t = this.getTransform();
      if (t.a * x + t.e <= 0 && t.d * y + t.f <= 0 && t.a * w >= this.canvas.width && t.d * h >= this.canvas.height) {
        this.canvas.__texts = [];
        this.canvas.__fills = [];
      }
      return clear.call(this, x, y, w, h);
    };
    P.fillText = function (text, x, y, ...rest) {
      const m = this.measureText(text);
      const t = this.getTransform();
      const xs = [];
      const ys = [];
      for (const [px, py] of [
        [x - m.actualBoundingBoxLeft, y - m.actualBoundingBoxAscent],
        [x + m.actualBoundingBoxRight, y - m.actualBoundingBoxAscent],
        [x - m.actualBoundingBoxLeft, y + m.actualBoundingBoxDescent],
        [x + m.actualBoundingBoxRight, y + m.actualBoundingBoxDescent],
      ]) {
        xs.push(t.a * px + t.c * py + t.e);
        ys.push(t.b * px + t.d * py + t.f);
      }
      (this.canvas.__texts ??= []).push({ text: String(text), fill: String(this.fillStyle), rotated: t.b !== 0 || t.c !== 0, x0: Math.min(...xs), y0: Math.min(...ys), x1: Math.max(...xs), y1: Math.max(...ys) });
      return fill.call(this, text, x, y, ...rest);
    };
    P.fill = function (...args) {
      (this.canvas.__fills ??= []).push(String(this.fillStyle));
      return fillPath.apply(this, args);
    };
  });
}

/** The texts painted on the canvases matching selector, each with its
 * canvas's size, its page position (CSS pixels) and the colours of the
 * paths it filled. */
export function canvasTexts(locator) {
  return locator.evaluateAll((canvases) =>
    canvases.map((c) => {
      const r = c.getBoundingClientRect();
      return { width: c.width, height: c.height, sx: r.width / c.width, sy: r.height / c.height, left: r.left, top: r.top, texts: c.__texts ?? [], fills: c.__fills ?? [] };
    }),
  );
}

/** Pairs of boxes that overlap (by more than a pixel). */
export function overlaps(texts) {
  const out = [];
  for (let i = 0; i < texts.length; i++)
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i];
      const b = texts[j];
      if (a.x0 < b.x1 - 1 && b.x0 < a.x1 - 1 && a.y0 < b.y1 - 1 && b.y0 < a.y1 - 1) out.push(`"${a.text}" and "${b.text}"`);
    }
  return out;
}

/** "#0f172a" or "rgb(15, 23, 42)" as [r, g, b]. */
export function rgb(c) {
  const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(c);
  if (hex) return hex.slice(1).map((x) => parseInt(x, 16));
  const m = /^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)/.exec(c);
  if (!m) throw new Error(`not a colour: ${c}`);
  return m.slice(1).map(Number);
}

/** Two colours (as rgb reads them) equal within rounding. */
export const sameColor = (a, b) => rgb(a).every((v, i) => Math.abs(v - rgb(b)[i]) <= 1);

/** WCAG 2's contrast ratio of two opaque colours. */
export function contrast(a, b) {
  const lum = (c) => {
    const [r, g, bl] = c.map((v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [l1, l2] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (l1 + 0.05) / (l2 + 0.05);
}
