// The React chat page: `npm run build:react` (repository root) builds it into web/dist/, which
// examples/react_chat/app.py serves.
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  plugins: [react()],
  // the AI SDK (with zod) is most of the bundle: about 540 kB, 150 kB gzipped
  build: { outDir: "dist", emptyOutDir: true, chunkSizeWarningLimit: 800 },
  server: { proxy: { "/api": "http://127.0.0.1:8000" } },
});
