// The build goes straight into the Python package, so `pip install` ships it and
// `vancetope serve` needs no Node.js. Hashed file names under assets/ are cached for a
// year by the gateway; index.html is revalidated on every load.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "../vancetope_gateway/web",
    emptyOutDir: true,
    // The CSP forbids inline scripts; Vite then never inlines its module preload polyfill.
    modulePreload: { polyfill: false },
    sourcemap: false,
    chunkSizeWarningLimit: 2000,
  },
});
