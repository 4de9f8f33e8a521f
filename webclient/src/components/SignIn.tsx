import { Alert, Button, Center, Code, Paper, PasswordInput, Stack, Text, Title } from "@mantine/core";
import { useState } from "react";

import { signIn } from "../client";
import { useStore } from "../store";

/** Shown while signed out: paste a token, or open the URL `vancetope serve` printed. */
export function SignIn() {
  const error = useStore((s) => s.authError);
  const [token, setToken] = useState("");
  return (
    <Center component="main" mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" maw={480} w="100%">
        <form onSubmit={(e) => { e.preventDefault(); if (token.trim()) signIn(token.trim()); }}>
          <Stack>
            <Title order={1} size="h2">Vancetope</Title>
            {error && <Alert color="red" title="Signed out" role="alert">{error}</Alert>}
            <Text size="sm">
              Open the sign-in link that <Code>vancetope serve</Code> printed, or paste your
              token (in <Code>DATA_DIR/token</Code>).
            </Text>
            <PasswordInput label="Token" value={token} autoComplete="off"
              onChange={(e) => setToken(e.currentTarget.value)} />
            <Button type="submit" disabled={!token.trim()}>Sign in</Button>
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}
