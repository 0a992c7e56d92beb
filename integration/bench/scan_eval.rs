//! The block evaluation: a labelled set built at run time, scored with the default policy.
//!
//! Positives are credentials in the formats their vendors and tools document (Azure connection
//! strings and `account_key` settings, `~/.docker/config.json`, `curl -u`, Kubernetes `Secret`
//! manifests, `NuGet.Config`, Discord bot tokens, `key = value` in configuration, what only a
//! parsed configuration file shows (a vague key under a credential parent, `name`/`value`
//! pairs, a `Secret`'s entries, block scalars, escaped quotes, sections), every vendor
//! rule's own format, URLs with passwords, private keys), with random bodies from
//! `rwfs::score::sample`. Negatives are what sits next to them in real trees: placeholders and
//! references, documentation examples, test fixtures, hashes, UUIDs, lockfiles, Firebase web
//! configs, redacted tokens. An item counts as blocked when `Policy::default()` blocks the
//! write at its path. Each negative is filed under the type it imitates, so precision is per
//! type too. Nothing here is committed as a literal credential: every value is made at run time.
//!
//! This set is written by the people who wrote the rules, so it checks that the formats and the
//! context rules work as intended; it is not an independent measure of recall.

use base64::Engine as _;
use rwfs::policy::{Action, Policy};
use rwfs::score::rules::RULES;
use rwfs::score::sample::{self as s, ALNUM, BASE64, HEX, LETTERS, LOWER, Rng, generate};
use rwfs::score::{Scanner, Severity};

/// One labelled write.
pub struct Item {
    pub kind: &'static str,
    pub positive: bool,
    pub path: String,
    pub text: String,
}

/// Counts of one type.
#[derive(Default, Clone, Copy)]
pub struct Score {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    pub tn: usize,
}

impl Score {
    pub fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 { 1.0 } else { self.tp as f64 / (self.tp + self.fp) as f64 }
    }

    pub fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 { 1.0 } else { self.tp as f64 / (self.tp + self.fn_) as f64 }
    }

    pub fn add(&mut self, other: Score) {
        self.tp += other.tp;
        self.fp += other.fp;
        self.fn_ += other.fn_;
        self.tn += other.tn;
    }
}

/// Score every item: (type, counts) in order of first appearance, and the items that went wrong.
pub fn evaluate(scanner: &Scanner, items: &[Item]) -> (Vec<(&'static str, Score)>, Vec<String>) {
    let policy = Policy::default();
    let mut scores: Vec<(&'static str, Score)> = Vec::new();
    let mut wrong = Vec::new();
    for item in items {
        let report = scanner.scan(item.text.as_bytes(), Some(&item.path));
        let blocked = policy.decide(&report, &item.path).action == Action::Block;
        let i = match scores.iter().position(|(k, _)| *k == item.kind) {
            Some(i) => i,
            None => {
                scores.push((item.kind, Score::default()));
                scores.len() - 1
            }
        };
        let score = &mut scores[i].1;
        match (item.positive, blocked) {
            (true, true) => score.tp += 1,
            (true, false) => score.fn_ += 1,
            (false, true) => score.fp += 1,
            (false, false) => score.tn += 1,
        }
        if item.positive != blocked {
            let rules: Vec<&str> = report.findings.iter().map(|f| f.rule.as_str()).collect();
            let label = if item.positive { "missed" } else { "false block" };
            wrong.push(format!("{label}: {} at {} ({rules:?})", item.kind, item.path));
        }
    }
    (scores, wrong)
}

const SEEDS: u64 = 24;

/// The labelled set.
pub fn items() -> Vec<Item> {
    let mut out = Vec::new();
    let mut add = |kind, positive, path: &str, text: String| {
        out.push(Item { kind, positive, path: path.to_string(), text });
    };
    let b64 = base64::engine::general_purpose::STANDARD;
    for seed in 0..SEEDS {
        let rng = &mut Rng::new(0x5eed_0000 + seed);
        let n = seed as usize;
        let password = rng.string(ALNUM, 14 + n % 10);
        let user = rng.string(LOWER, 6);

        // Azure storage account keys.
        let key = s::azure_storage_key(rng);
        let account = rng.string(LOWER, 10);
        let azure = [
            (
                "appsettings.json",
                format!(
                    "{{\"Storage\": \"DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};EndpointSuffix=core.windows.net\"}}\n"
                ),
            ),
            ("config/storage.yaml", format!("azure:\n  account_name: {account}\n  account_key: {key}\n")),
            (".env", format!("AZURE_STORAGE_ACCOUNT={account}\nAZURE_STORAGE_KEY={key}\n")),
            ("infra/main.tf", format!("storage_account_key = \"{key}\"\n")),
            ("src/Blob.cs", format!("var conn = \"AccountName={account};AccountKey={key}\";\n")),
        ];
        let (path, text) = &azure[n % azure.len()];
        add("azure storage key", true, path, text.clone());
        let azure_neg = [
            format!("AccountName={account};AccountKey=<storage-account-key>;\n"),
            format!(
                "AccountName=devstoreaccount1;AccountKey={key};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;\n"
            ),
            "account_key: ${AZURE_STORAGE_KEY}\n".to_string(),
            "AccountKey=[account key]\n".to_string(),
        ];
        add("azure storage key", false, "config/storage.yaml", azure_neg[n % azure_neg.len()].clone());

        // Docker `auths`.
        let auth = b64.encode(format!("{user}:{password}"));
        let docker = [
            s::docker_config(rng),
            format!(
                "{{\"auths\":{{\"https://index.docker.io/v1/\":{{\"auth\":\"{auth}\",\"email\":\"{user}@acme.io\"}}}},\"HttpHeaders\":{{\"User-Agent\":\"Docker-Client\"}}}}"
            ),
        ];
        add("docker auths", true, [".docker/config.json", "config.json"][n % 2], docker[n % 2].clone());
        let docker_neg = [
            format!("{{\"auths\": {{\"ghcr.io\": {{\"auth\": \"{}\"}}}}}}\n", b64.encode("username:password")),
            "{\"auths\": {\"ghcr.io\": {}}, \"credsStore\": \"desktop\"}\n".to_string(),
            "{\"auths\": {\"ghcr.io\": {\"auth\": \"${DOCKER_AUTH}\"}}}\n".to_string(),
        ];
        add("docker auths", false, ".docker/config.json", docker_neg[n % docker_neg.len()].clone());

        // curl and other command lines.
        let curl = [
            ("deploy.sh", format!("curl -fsS -u {user}:{password} https://ci.acme.io/job/build\n")),
            (".bash_history", format!("curl --user '{user}:{password}' -X POST https://api.acme.io/v1\n")),
            (".gitlab-ci.yml", format!("script:\n  - curl -u \"{user}:{password}\" https://nexus.acme.io/upload\n")),
            ("backup.sh", format!("mysqldump -h db1 --user=backup --password={password} app > app.sql\n")),
            ("ops.sh", format!("sshpass -p '{password}' ssh {user}@10.0.0.5\n")),
        ];
        let (path, text) = &curl[n % curl.len()];
        add("command-line password", true, path, text.clone());
        let curl_neg = [
            "curl -u $API_USER:$API_TOKEN https://api.acme.io\n",
            "curl -u user:password https://httpbin.org/basic-auth/user/password\n",
            "curl -u admin:admin http://localhost:8080\n",
            "curl -u \"$CREDENTIALS\" https://api.acme.io\n",
            "echo \"$PASS\" | docker login --password-stdin -u ci ghcr.io\n",
            "mysql --user=root --password=$MYSQL_ROOT_PASSWORD\n",
        ];
        add("command-line password", false, "deploy.sh", curl_neg[n % curl_neg.len()].to_string());

        // Kubernetes Secrets.
        let value = b64.encode(&password);
        let k8s = [
            s::k8s_secret(rng),
            format!(
                "apiVersion: v1\ndata:\n  api-token: {value}\nkind: Secret\nmetadata:\n  name: api\n  namespace: prod\ntype: Opaque\n"
            ),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  DB_PASSWORD: {value}\n"
            ),
        ];
        add("kubernetes secret", true, "k8s/secret.yaml", k8s[n % k8s.len()].clone());
        let k8s_neg = [
            format!("kind: Secret\nmetadata:\n  name: db\ndata:\n  password: {}\n", b64.encode("changeme")),
            "kind: ConfigMap\ndata:\n  LOG_LEVEL: aW5mbw==\n".to_string(),
            "kind: Secret\nstringData:\n  password: ${DB_PASSWORD}\n".to_string(),
            format!(
                "kind: Secret\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n",
                b64.encode(format!(
                    "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                    rng.string(BASE64, 64)
                ))
            ),
        ];
        add("kubernetes secret", false, "k8s/secret.yaml", k8s_neg[n % k8s_neg.len()].clone());

        // NuGet.
        add(
            "nuget password",
            true,
            "NuGet.Config",
            format!(
                "<configuration>\n  <packageSourceCredentials>\n    <acme>\n      <add key=\"Username\" value=\"{user}\" />\n      <add key=\"ClearTextPassword\" value=\"{password}\" />\n    </acme>\n  </packageSourceCredentials>\n</configuration>\n"
            ),
        );
        let nuget_neg = ["%NUGET_PASSWORD%", "password", "$(NugetPassword)", "<password>"];
        add(
            "nuget password",
            false,
            "NuGet.Config",
            format!("<add key=\"ClearTextPassword\" value=\"{}\" />\n", nuget_neg[n % nuget_neg.len()]),
        );

        // Discord bot tokens.
        let token = s::discord_bot_token(rng);
        let discord = [
            (".env", format!("BOT_TOKEN={token}\n")),
            ("bot.py", format!("client.run(\"{token}\")\n")),
            ("config.json", format!("{{\"prefix\": \"!\", \"token\": \"{token}\"}}\n")),
        ];
        let (path, text) = &discord[n % discord.len()];
        add("discord bot token", true, path, text.clone());
        let letters = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rng.string(LETTERS, 18));
        let discord_neg = [
            format!("session {letters}.{}.{} expired\n", rng.string(ALNUM, 6), rng.string(ALNUM, 38)),
            "BOT_TOKEN=your-bot-token-here\n".to_string(),
            format!("client.run(os.environ[\"DISCORD_TOKEN\"])  # {}\n", rng.string(HEX, 8)),
        ];
        add("discord bot token", false, ".env", discord_neg[n % discord_neg.len()].clone());

        // Generic assignments in configuration.
        let values = [
            rng.string(ALNUM, 20),
            format!("{}{}!{}", rng.string(LETTERS, 6), rng.below(9000) + 1000, rng.string(LOWER, 3)),
            rng.string(HEX, 32),
            rng.string(BASE64, 40),
        ];
        let value = &values[n % values.len()];
        let config = [
            (".env", format!("DB_HOST=db\nDB_PASSWORD={value}\n")),
            ("config/app.yaml", format!("database:\n  host: db\n  password: \"{value}\"\n")),
            ("appsettings.json", format!("{{\"Auth\": {{\"ClientSecret\": \"{value}\"}}}}\n")),
            ("settings.ini", format!("[service]\napi_key = {value}\n")),
            ("Dockerfile", format!("FROM node:20\nENV AUTH_TOKEN={value}\n")),
            (".github/workflows/deploy.yml", format!("env:\n  DEPLOY_TOKEN: {value}\n")),
            ("config.toml", format!("[smtp]\npassword = '{value}'\n")),
            ("docker-compose.yml", format!("services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: {value}\n")),
            ("deploy/.env.production", format!("MYSQL_USER=app\nMYSQL_PASS={value}\n")),
        ];
        let (path, text) = &config[n % config.len()];
        add("generic in config", true, path, text.clone());
        let config_neg = [
            "DB_PASSWORD=${DB_PASSWORD}\n",
            "api_key: <your-api-key>\n",
            "password: changeme\n",
            "token: your_token_here\n",
            "SECRET_KEY=xxxxxxxxxxxxxxxxxxxx\n",
            "secret_file: /run/secrets/db_password\n",
            "token_url: https://auth.acme.io/oauth/token\n",
            "password_min_length: 12\n",
            "auth: true\n",
            "api_key_header: X-Api-Key\n",
            "token_type: Bearer\n",
            "password: \"{{ .Values.db.password }}\"\n",
        ];
        add("generic in config", false, "config/app.yaml", config_neg[n % config_neg.len()].to_string());
        // The same lines in fixtures and documentation: warnings, not blocks.
        let sample_paths = ["tests/fixtures/app.yaml", "docs/configuration.md", "config.example.yaml", "README.md"];
        add(
            "generic in fixtures/docs",
            false,
            sample_paths[n % sample_paths.len()],
            format!("password: {value}\napi_key: {}\n", rng.string(ALNUM, 24)),
        );
        // In code a literal assigned to `password` warns by design (test values, defaults).
        let code = [
            ("src/settings.py", format!("DB_PASSWORD = \"{value}\"\n")),
            ("src/config.js", format!("const apiKey = \"{value}\";\n")),
            ("src/main/java/Db.java", format!("private static final String PASSWORD = \"{value}\";\n")),
        ];
        let (path, text) = &code[n % code.len()];
        add("generic in code", true, path, text.clone());

        // Parsed configuration: what only the structure shows (a vague key under a credential
        // parent, `name`/`value` pairs, a `Secret`'s entries of any name, block scalars,
        // escaped quotes, sections, files of no telling name).
        let (head, tail) = value.split_at(value.len() / 2);
        let parsed = [
            ("config/app.yaml", format!("api:\n  url: https://api.acme.io\n  key: {value}\n")),
            (
                "k8s/deploy.yaml",
                format!(
                    "containers:\n  - name: app\n    env:\n      - name: SMTP_PASSWORD\n        value: \"{value}\"\n"
                ),
            ),
            ("config/db.yml", format!("db:\n  host: db1\n  password: >-\n    {value}\n")),
            (
                "k8s/secret.yaml",
                format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\nstringData:\n  stripe: \"{value}\"\n"),
            ),
            (
                "k8s/secret.json",
                format!(
                    "{{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"data\": {{\"stripe\": \"{}\"}}}}\n",
                    b64.encode(value)
                ),
            ),
            ("appsettings.json", format!("{{\"Smtp\": {{\"Password\": \"{head}\\\"{tail}\"}}}}\n")),
            (
                "appsettings.Production.json",
                format!("{{\"settings\": [{{\"key\": \"SmtpPassword\", \"value\": \"{value}\"}}]}}\n"),
            ),
            (
                "config/credentials.json",
                format!("{{\"credentials\": {{\"type\": \"static\", \"value\": \"{value}\"}}}}\n"),
            ),
            ("config.toml", format!("[api]\nendpoint = \"https://api.acme.io\"\nkey = \"{value}\"\n")),
            ("settings.ini", format!("[stripe_api]\nkey = {value}\n")),
            ("mail.cfg", format!("[smtp]\nhost = mail.acme.io\npass = {value}\n")),
            ("deploy/settings", format!("{{\"api\": {{\"key\": \"{}\"}}}}\n", rng.string(ALNUM, 24))),
        ];
        let (path, text) = &parsed[n % parsed.len()];
        add("parsed config", true, path, text.clone());
        // The same in fixtures and documentation: a warning.
        let fixture = format!("tests/fixtures/{}", path.rsplit('/').next().unwrap_or(path));
        add("parsed in fixtures", false, &fixture, text.clone());
        let parsed_neg = [
            ("config/app.yaml", "api:\n  key: ${API_KEY}\n".to_string()),
            ("config/app.yaml", "api:\n  key: \"{{ .Values.apiKey }}\"\n".to_string()),
            ("config/app.yaml", format!("cache:\n  key: {value}\nmonkey:\n  value: {value}\n")),
            ("k8s/deploy.yaml", format!("env:\n  - name: BUILD_ID\n    value: \"{value}\"\n")),
            ("k8s/cm.yaml", format!("kind: ConfigMap\ndata:\n  stripe: {}\n", b64.encode(value))),
            ("k8s/secret.yaml", format!("kind: Secret\nstringData:\n  username: {user}\n  host: db.acme.io\n")),
            ("appsettings.json", "{\"Smtp\": {\"Password\": \"<smtp-password>\"}}\n".to_string()),
            ("appsettings.json", format!("{{\"public_key\": {{\"value\": \"{value}\"}}}}\n")),
            ("config.toml", format!("[auth]\ntoken_url = \"https://auth.acme.io/{user}\"\npassword_min_length = 12\n")),
            ("settings.ini", "[smtp]\npass = %(SMTP_PASS)s\nkey = $SMTP_KEY\n".to_string()),
            (
                "package.json",
                format!(
                    "{{\"name\": \"x\", \"dependencies\": {{\"passport\": \"^0.7.0\", \"jsonwebtoken\": \"^9.0.2\"}}, \"gitHead\": \"{}\"}}\n",
                    rng.string(HEX, 40)
                ),
            ),
        ];
        let (path, text) = &parsed_neg[n % parsed_neg.len()];
        add("parsed config", false, path, text.clone());

        // URLs with passwords.
        let urls = [
            (".env", format!("DATABASE_URL={}\n", s::database_url(rng))),
            ("config.yaml", format!("broker: amqp://{user}:{password}@mq.internal:5672/prod\n")),
            ("git.conf", format!("url = https://{user}:{password}@git.acme.io/repo.git\n")),
        ];
        let (path, text) = &urls[n % urls.len()];
        add("url password", true, path, text.clone());
        let url_neg = [
            "remote = https://user:abc@git.acme.io/repo.git\n",
            "proxy: http://bob:1111@proxy.acme.io:3128\n",
            "DATABASE_URL=postgres://postgres:postgres@localhost:5432/app\n",
            "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app\n",
        ];
        add("url password", false, "config.yaml", url_neg[n % url_neg.len()].to_string());

        // Private keys.
        let pem = if n.is_multiple_of(2) { s::pem_rsa(rng) } else { s::pem_openssh(rng) };
        add("private key", true, ["deploy/id_rsa", "certs/server.key"][n % 2], format!("{pem}\n"));
        add(
            "private key",
            false,
            "docs/tls.md",
            "Put your key in `server.key`; it starts with `-----BEGIN PRIVATE KEY-----`.\n".to_string(),
        );

        // Hashes, UUIDs and lockfiles, filed under the vendor tokens they could be mistaken for.
        let hash_neg = [
            (
                "Cargo.lock",
                format!("[[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nchecksum = \"{}\"\n", rng.string(HEX, 64)),
            ),
            (
                "package-lock.json",
                format!("{{\"node_modules/x\": {{\"integrity\": \"sha512-{}==\"}}}}\n", rng.string(BASE64, 86)),
            ),
            (
                "yarn.lock",
                format!(
                    "x@^1.0.0:\n  resolved \"https://registry.yarnpkg.com/x/-/x-1.0.0.tgz#{}\"\n",
                    rng.string(HEX, 40)
                ),
            ),
            ("go.sum", format!("github.com/x/y v1.0.0 h1:{}=\n", rng.string(BASE64, 43))),
            (
                "config.yaml",
                format!(
                    "request_id: {}\nsha256: {}\ncommit: {}\n",
                    s::uuid(rng),
                    rng.string(HEX, 64),
                    rng.string(HEX, 40)
                ),
            ),
        ];
        let (path, text) = &hash_neg[n % hash_neg.len()];
        add("vendor tokens", false, path, text.clone());
        // Redacted and placeholder vendor tokens, Firebase web keys, file names.
        let google = generate(rule("google-api-key").sample, rng);
        let vendor_neg = [
            ("src/firebase.js", format!("const firebaseConfig = {{\n  apiKey: \"{google}\",\n  authDomain: \"acme.firebaseapp.com\",\n  projectId: \"acme\",\n}};\n")),
            ("static/index.html", format!("<link rel=\"icon\" href=\"/static/ico-{}.png\">\n", rng.string(HEX, 32))),
            (".env", format!("SHOPIFY_API_SECRET=shpss_{}\n", "a1b2c3d4e5f6a7b8".repeat(2))),
            ("notes.md", "Authorization: Bearer sk-ant-oat01-{REDACTED}\nGITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".to_string()),
            ("docs/aws.md", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n".to_string()),
        ];
        let (path, text) = &vendor_neg[n % vendor_neg.len()];
        add("vendor tokens", false, path, text.clone());
    }
    // Every vendor rule's own format, once, in the file its env var belongs to.
    for (i, rule) in RULES.iter().enumerate().filter(|(_, r)| r.severity == Severity::Credential && !r.generic) {
        let secret = generate(rule.sample, &mut Rng::new(0xbeef + i as u64));
        let path = [".env", "settings.py", "config.yaml"][i % 3];
        let multiline = secret.contains('\n');
        let text = match path {
            ".env" if !multiline => format!("{}={secret}\n", rule.env),
            "settings.py" if !multiline => format!("{} = \"{secret}\"\n", rule.env),
            "settings.py" => format!("{} = \"\"\"{secret}\"\"\"\n", rule.env),
            _ if !multiline => format!("{}: {secret}\n", rule.env.to_lowercase()),
            _ => format!("{}: |\n  {}\n", rule.env.to_lowercase(), secret.replace('\n', "\n  ")),
        };
        add("vendor tokens", true, path, text);
    }
    out
}

fn rule(id: &str) -> &'static rwfs::score::Rule {
    RULES.iter().find(|r| r.id == id).expect("rule exists")
}
