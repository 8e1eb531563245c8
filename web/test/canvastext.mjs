// What a page painted as text on its canvases (uPlot's axes, the map's
// labels), recorded by the browser itself: an init script wraps
// CanvasRenderingContext2D's fillText and keeps, per canvas, each string
// with its colour (fillStyle as the canvas normalised it) and its box in
// canvas pixels (measureText's actual bounds around the
// point drawn at, through the context's transform, so rotated labels
// count as drawn, marked rotated); a clearRect of the whole canvas starts the list again.
// The tests read the boxes to check labels for overlap and clipping
// without trusting the page's own account of them.

/** Installs the recorder in every page of the context (before any script). */
export function recordCanvasText(context) {
  return context.addInitScript(() => {
    const P = CanvasRenderingContext2D.prototype;
    const fill = P.fillText;
    const clear = P.clearRect;
    P.clearRect = function (x, y, w, h) {
      const t = this.getTransform();
      if (t.a * x + t.e <= 0 && t.d * y + t.f <= 0 && t.a * w >= this.canvas.width && t.d * h >= this.canvas.height) this.canvas.__texts = [];
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
  });
}

/** The texts painted on the canvases matching selector, each with its
 * canvas's size and its page position (CSS pixels). */
export function canvasTexts(locator) {
  return locator.evaluateAll((canvases) =>
    canvases.map((c) => {
      const r = c.getBoundingClientRect();
      return { width: c.width, height: c.height, sx: r.width / c.width, sy: r.height / c.height, left: r.left, top: r.top, texts: c.__texts ?? [] };
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
