import "@mantine/core/styles.css";
import "@mantine/notifications/styles.css";
import "highlight.js/styles/github.css";
import "./app.css";

import { MantineProvider } from "@mantine/core";
import { Notifications } from "@mantine/notifications";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";

import { takeTokenFromFragment } from "./auth";
import { signIn, start } from "./client";
import { App } from "./components/App";

const fromUrl = takeTokenFromFragment();
if (fromUrl) signIn(fromUrl);
else start();

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <MantineProvider defaultColorScheme="light">
      <Notifications position="top-right" />
      <App />
    </MantineProvider>
  </StrictMode>,
);
