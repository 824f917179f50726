// ESLint for the console's JavaScript (coordinator/console/, browser modules) and its unit tests
// (tests/console/js/, run by `node --test`). `.ci/console-deps` installs eslint from npm.
import js from "@eslint/js";
import globals from "globals";

const quality = {
  "no-unused-vars": ["error", { args: "after-used", ignoreRestSiblings: true }],
  eqeqeq: ["error", "always", { null: "ignore" }],
  "no-var": "error",
  "prefer-const": "error",
  "no-shadow": "error",
  "no-implicit-coercion": ["error", { allow: ["!!", "+"] }],
  "no-throw-literal": "error",
  "no-eval": "error",
  "no-implied-eval": "error",
  "no-new-func": "error",
  "no-restricted-properties": [
    "error",
    { object: "document", property: "write", message: "Build elements with h() instead." },
  ],
  "no-restricted-syntax": [
    "error",
    {
      selector: "AssignmentExpression[left.property.name=/^(innerHTML|outerHTML)$/]",
      message: "Text is set as text: build elements with h(), never HTML from strings.",
    },
  ],
  curly: ["error", "multi-line"],
  "max-depth": ["error", 4],
};

export default [
  { ignores: ["node_modules/", ".venv/", "build/", "test-artifacts/"] },
  js.configs.recommended,
  {
    files: ["coordinator/console/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
    rules: quality,
  },
  {
    files: ["tests/console/js/**/*.js", "eslint.config.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.node },
    rules: quality,
  },
];
