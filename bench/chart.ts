/**
 * Line charts as SVG, drawn from a benchmark's own figures (`deno task bench` writes them beside
 * its tables; the README shows them). No dependency: axes, ticks, one polyline and dots per series,
 * a legend.
 * @module
 */

/** One line: its name and its points (x ascending). */
export interface Series {
  readonly name: string;
  readonly points: ReadonlyArray<readonly [number, number]>;
  /** Drawn dashed: a reference (upstream's figure, the kernel's floor), not ours. */
  readonly reference?: boolean;
}

/** What a chart shows. */
export interface Chart {
  readonly title: string;
  readonly x: string;
  readonly y: string;
  readonly series: readonly Series[];
}

const W = 640, H = 360, L = 64, R = 170, T = 36, B = 48;
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

/** A round step giving about five ticks from 0 to `max`. */
function step(max: number): number {
  const raw = max / 5;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw)!;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const fmt = (v: number) => Number.isInteger(v) ? v.toLocaleString("en-US") : String(+v.toPrecision(3));

/** Returns the chart as a standalone SVG document; both axes start at 0. */
export function lineChart(c: Chart): string {
  const all = c.series.flatMap((s) => s.points);
  const xMax = Math.max(1, ...all.map(([x]) => x));
  const yStep = step(Math.max(1e-9, ...all.map(([, y]) => y)));
  const yMax = yStep * Math.ceil(Math.max(1e-9, ...all.map(([, y]) => y)) / yStep);
  const xStep = step(xMax);
  const px = (x: number) => L + (x / xMax) * (W - L - R);
  const py = (y: number) => H - B - (y / yMax) * (H - T - B);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(c.title)}</text>`,
  ];
  for (let y = 0; y <= yMax + 1e-9; y += yStep) {
    out.push(
      `<line x1="${L}" x2="${W - R}" y1="${py(y)}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${L - 6}" y="${py(y) + 4}" text-anchor="end">${fmt(y)}</text>`,
    );
  }
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    out.push(`<text x="${px(x)}" y="${H - B + 16}" text-anchor="middle">${fmt(x)}</text>`);
  }
  out.push(
    `<line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" stroke="black"/>`,
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" stroke="black"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - 10}" text-anchor="middle">${esc(c.x)}</text>`,
    `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(c.y)}</text>`,
  );
  c.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const dash = s.reference ? ` stroke-dasharray="6 4"` : "";
    const pts = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" ");
    out.push(`<polyline points="${pts}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`);
    for (const [x, y] of s.points) {
      out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${color}"/>`);
    }
    const ly = T + 8 + i * 18;
    out.push(
      `<line x1="${W - R + 12}" x2="${
        W - R + 36
      }" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`,
      `<text x="${W - R + 42}" y="${ly + 4}">${esc(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
