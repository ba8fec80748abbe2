// What a job asks for, in one short line: "4 cpu · 8Gi · 2×A100" (× replicas when it has several).

function memory(n) {
  if (!n) return null;
  const gi = n / 2 ** 30;
  if (gi >= 1) return `${Number.isInteger(gi) ? gi : gi.toFixed(1)}Gi`;
  return `${Math.round(n / 2 ** 20)}Mi`;
}

export function resourceText(spec) {
  const r = (spec && spec.resources) || {};
  const gpuType = Array.isArray(r.gpu_type) ? r.gpu_type.join("|") : r.gpu_type;
  const parts = [
    `${r.cpu ?? 1} cpu`,
    memory(r.memory),
    r.gpu ? `${r.gpu}×${gpuType || "GPU"}` : null,
  ].filter(Boolean);
  const replicas = (spec && spec.replicas) || 1;
  return (replicas > 1 ? `${replicas} × (${parts.join(" · ")})` : parts.join(" · "));
}
