// A page's own stylesheet, linked once when the page first shows (style.css holds what all pages share)
export function css(name) {
  const href = `/ui/${name}`;
  if (document.querySelector(`link[href="${href}"]`)) return;
  document.head.append(Object.assign(document.createElement("link"), { rel: "stylesheet", href }));
}
