// The console is served by intake under /ui (services/intake/src/ui.ts), so every asset URL
// is built relative to that base; `npm run build` writes console/dist.
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/ui/',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
});
