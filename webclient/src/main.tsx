import "@mantine/core/styles.css";
import "@mantine/notifications/styles.css";
import "highlight.js/styles/github.css";
import "./app.css";

import {
  createTheme, MantineProvider, Notification, useMatches, type CSSVariablesResolver,
} from "@mantine/core";
import { Notifications } from "@mantine/notifications";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";

import { takeTokenFromFragment } from "./auth";
import { signIn, signOut, start } from "./client";
import { App } from "./components/App";

const fromUrl = takeTokenFromFragment();
if (fromUrl) signIn(fromUrl);
else start();
// The sign-in link opened in a tab already showing the app only changes the fragment.
window.addEventListener("hashchange", () => {
  const token = takeTokenFromFragment();
  if (token) {
    signOut();
    signIn(token);
  }
});

// Darker shades than Mantine's defaults, so text on every badge, button and dimmed label
// meets WCAG AA contrast (the axe checks in tests/web); no animations for users who ask
// for reduced motion; a toast's close button says what it does.
const theme = createTheme({
  primaryShade: 8, autoContrast: true, respectReducedMotion: true,
  components: {
    Notification: Notification.extend({
      defaultProps: { closeButtonProps: { "aria-label": "Close notification" } },
      // Mantine's gray-6 under a title is 3.3:1 on white; gray-7 passes AA.
      styles: { description: { color: "var(--mantine-color-gray-7)" } },
    }),
  },
});
const contrast: CSSVariablesResolver = () => ({
  variables: {}, light: { "--mantine-color-dimmed": "var(--mantine-color-gray-7)" }, dark: {},
});

/** Toasts at the top right; on a phone, where the header is as wide as a toast and holds
 * the menu button, at the bottom instead. */
function Toasts() {
  const position = useMatches({ base: "bottom-center", sm: "top-right" } as const,
    { getInitialValueInEffect: false });
  return <Notifications position={position} />;
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <MantineProvider theme={theme} cssVariablesResolver={contrast} defaultColorScheme="light">
      <Toasts />
      <App />
    </MantineProvider>
  </StrictMode>,
);
