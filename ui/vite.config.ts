// The dashboard's build: static files written into the Python package (tickwork/web/dist),
// so `pip install` serves them with no Node.js on the machine. File names carry a content
// hash (served as immutable); index.html is the one file served fresh. `base: "./"`: one
// build serves any mount path (/, /tickwork/): files name each other relatively, and the
// server makes the page's own references absolute and names the path in a meta tag.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import react from "@vitejs/plugin-react";
import type { Plugin } from "vite";
import { defineConfig } from "vitest/config";

// Each built script and stylesheet also written gzipped (name.gz), once, at build: the
// server sends it to a browser that accepts gzip (Content-Encoding, Vary: Accept-Encoding)
// with no compression work per request. gzip's output carries no time stamp, so a build
// makes the same bytes each time (CI compares the committed bundle with a fresh build).
function precompress(): Plugin {
  return {
    name: "tickwork-precompress",
    apply: "build",
    writeBundle(options) {
      const assets = join(options.dir ?? "", "assets");
      for (const name of readdirSync(assets)) {
        if (/\.(js|css|svg)$/.test(name)) {
          const packed = gzipSync(readFileSync(join(assets, name)), { level: 9 });
          writeFileSync(join(assets, `${name}.gz`), packed);
        }
      }
    },
  };
}

export default defineConfig({
  plugins: [react(), precompress()],
  base: "./",
  build: {
    outDir: "../src/tickwork/web/dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  server: { proxy: { "/api": "http://127.0.0.1:8080" } },
  test: { environment: "jsdom", globals: true },
});
