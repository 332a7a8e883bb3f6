// The dashboard's build: static files written into the Python package (tickwork/web/dist),
// so `pip install` serves them with no Node.js on the machine. File names carry a content
// hash (served as immutable); index.html is the one file served fresh. `base: "./"`: one
// build serves any mount path (/, /tickwork/): files name each other relatively, and the
// server makes the page's own references absolute and names the path in a meta tag.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [react()],
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
