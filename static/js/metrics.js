// The Metrics page's charts: uPlot line charts drawn from the JSON the server renders beside
// them (#metrics-chart-data), redrawn after every htmx swap of the figures and on resize.
(function () {
  "use strict";
  const COLORS = ["#0550ae", "#1a7f37", "#bf3989", "#953800"];
  let plots = [];

  function format(value, unit) {
    if (value === null || value === undefined) return "–";
    const size = Math.abs(value);
    if (size >= 10000) return (value / 1000).toFixed(size >= 100000 ? 0 : 1) + "k" + unit;
    const digits = size >= 100 ? 0 : size >= 10 ? 1 : 2;
    return value.toFixed(digits) + unit;
  }

  // The y axis as wide as its longest label, so that no label is cut off.
  function axisSize(u, values) {
    const longest = Math.max(0, ...(values || []).map((v) => String(v).length));
    return Math.max(50, longest * 8 + 22);
  }

  function draw() {
    plots.forEach((p) => p.destroy());
    plots = [];
    const source = document.getElementById("metrics-chart-data");
    if (!source || typeof uPlot === "undefined") return;
    const data = JSON.parse(source.textContent);
    data.charts.forEach((chart) => {
      const el = document.querySelector(`.chart[data-chart="${chart.id}"]`);
      if (!el) return;
      const names = Object.keys(chart.series);
      const opts = {
        width: Math.max(el.clientWidth, 240),
        height: 200,
        scales: { x: { time: true } },
        legend: { live: true },
        series: [
          { label: data.period === "day" ? "Day" : "Week of", value: "{YYYY}-{MM}-{DD}" },
          ...names.map((name, i) => ({
            label: name,
            stroke: COLORS[i % COLORS.length],
            width: 2,
            spanGaps: true,
            points: { show: data.x.length < 40 },
            value: (u, v) => format(v, chart.unit),
          })),
        ],
        axes: [{}, { size: axisSize, values: (u, ticks) => ticks.map((v) => format(v, chart.unit)) }],
      };
      plots.push(new uPlot(opts, [data.x, ...names.map((n) => chart.series[n])], el));
    });
  }

  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(draw, 150);
  });
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSettle", (event) => {
    if (event.target && event.target.id === "metrics-figures") draw();
  });
})();
