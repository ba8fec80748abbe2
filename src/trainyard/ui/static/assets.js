// Stylesheets and vendored scripts a page part needs, loaded once on first use.

const loading = new Map();

export function css(href) {
  if (!document.querySelector(`link[rel=stylesheet][href="${href}"]`)) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = href;
    document.head.append(link);
  }
}

// A classic (non-module) script, e.g. a vendored IIFE build; resolves when it has run
export function script(src) {
  if (!loading.has(src)) {
    loading.set(src, new Promise((resolve, reject) => {
      const el = document.createElement("script");
      el.src = src;
      el.onload = () => resolve();
      el.onerror = () => { loading.delete(src); reject(new Error(`could not load ${src}`)); };
      document.head.append(el);
    }));
  }
  return loading.get(src);
}
