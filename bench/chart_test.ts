import { assertEquals, assertMatch } from "../tests/support/assert.ts";
import { lineChart } from "./chart.ts";

Deno.test("lineChart: one line per series through its points, references dashed, names escaped in the legend", () => {
  const svg = lineChart({
    title: "RSS after the first sync",
    x: "Services",
    y: "MiB",
    series: [
      { name: "nftables", points: [[1000, 85], [5000, 150], [10000, 230]] },
      { name: "upstream <1.36>", points: [[1000, 80], [10000, 249]], reference: true },
    ],
  });
  const lines = [...svg.matchAll(/<polyline points="([^"]+)"[^>]*?( stroke-dasharray="6 4")?\/>/g)];
  assertEquals(lines.length, 2);
  const first = lines[0][1].split(" ").map((p) => p.split(",").map(Number));
  // x runs from the left axis (0) to the plot's right edge (the largest x); y grows upwards.
  assertEquals(first.map(([x]) => Math.round(x)), [105, 267, 470]);
  assertEquals(first[0][1] > first[1][1] && first[1][1] > first[2][1], true);
  assertEquals([lines[0][2], lines[1][2]], [undefined, ' stroke-dasharray="6 4"']);
  assertMatch(svg, /upstream &lt;1\.36&gt;/);
  // The y axis reaches past the largest value, at a round tick.
  assertMatch(svg, />250<\/text>/);
});
