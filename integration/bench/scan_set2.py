#!/usr/bin/env python3
"""The second evaluation set: realistic files with credentials in them, made differently.

The labelled set of `scan_eval.rs` is written by the people who write the rules, with the rules'
own sample generators. This one is not: it is a Python program with its own list of services,
its own knowledge of what their keys look like (from the vendors' documentation, written down
here independently of `src/score/`), and its own templates of the places real leaks are found —
configuration (.env, YAML, JSON, TOML, INI, properties, XML, docker-compose, Kubernetes,
Terraform), code in ten languages, documentation, logs, CI files, shell history and command
lines. It reads nothing from `src/`. Negatives are the same templates with what sits in those
places when nothing leaks: references to the environment, placeholders, redactions, hashes,
UUIDs used as identifiers, public values (Firebase web keys, publishable keys), example JWTs,
commit hashes, lockfile integrity strings, and plain code.

    scan_set2.py generate --out DIR [--seed N] [--per-service K]
        writes DIR/files/<n>/<path> (one file per item) and DIR/labels.jsonl
    scan_set2.py score --out DIR --rwfs BIN
        runs `BIN scan --json DIR/files` and prints precision and recall of "blocked"
        (per context, per kind, and overall) and the items that went wrong

Every credential is random at generation time; none is committed.
"""

import argparse
import base64
import binascii
import hashlib
import json
import os
import random
import shutil
import string
import subprocess
import sys
import zlib

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
HEXL = "0123456789abcdef"
ALNUM = string.ascii_letters + string.digits
LOWNUM = LOWER + DIGITS
UPNUM = UPPER + DIGITS
B64 = string.ascii_letters + string.digits + "+/"
B64URL = string.ascii_letters + string.digits + "-_"


class Gen:
    """Random strings of the shapes vendors document."""

    def __init__(self, rng):
        self.r = rng

    def s(self, alphabet, n):
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def hex(self, n):
        return self.s(HEXL, n)

    def uuid(self):
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self.r.choice('89ab')}{h[17:20]}-{h[20:]}"

    def b64bytes(self, n):
        return base64.b64encode(bytes(self.r.getrandbits(8) for _ in range(n))).decode()

    def jwt(self, alg="HS256", **claims):
        """A signed JWT: base64url JSON header and payload, a random signature of the alg's size."""
        enc = lambda d: base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()).decode().rstrip("=")
        body = {"sub": self.s(LOWNUM, 12), "iat": self.r.randint(1600000000, 1800000000), "jti": self.uuid()}
        body.update(claims)
        sig = self.s(B64URL, 342 if alg.startswith("RS") else 43)
        return f"{enc({'alg': alg, 'typ': 'JWT'})}.{enc(body)}.{sig}"

    def crc_b62(self, body):
        """GitHub/npm style: 6 base62 digits of the CRC32 of the body."""
        alphabet = DIGITS + UPPER + LOWER
        n = zlib.crc32(body.encode()) & 0xFFFFFFFF
        out = ""
        while n:
            n, d = divmod(n, 62)
            out = alphabet[d] + out
        return out.rjust(6, "0")


# ---- Services: name, how people spell the variable, and what a key looks like -------------------
# (name for prose, variable stem, token maker). The variable stems are how the vendors' own
# quick-starts and SDK READMEs name them; a stem may be used with several suffixes below.

def services(g):
    """(display name, variable stem, maker) for every service in this set."""
    h = g.hex
    s = g.s
    out = [
        # Vendors whose tokens carry a prefix.
        ("GitHub", "GITHUB", lambda: (lambda b: "ghp_" + b + g.crc_b62(b))(s(ALNUM, 30))),
        ("GitLab", "GITLAB", lambda: "glpat-" + s(B64URL, 20)),
        ("Slack", "SLACK_BOT", lambda: f"xoxb-{s(DIGITS, 12)}-{s(DIGITS, 13)}-{s(ALNUM, 24)}"),
        ("Stripe", "STRIPE_SECRET", lambda: "sk_live_" + s(ALNUM, 99)),
        ("SendGrid", "SENDGRID", lambda: f"SG.{s(B64URL, 22)}.{s(B64URL, 43)}"),
        ("OpenAI", "OPENAI", lambda: f"sk-proj-{s(B64URL, 74)}T3BlbkFJ{s(B64URL, 74)}"),
        ("Anthropic", "ANTHROPIC", lambda: f"sk-ant-api03-{s(B64URL, 93)}AA"),
        ("Hugging Face", "HF", lambda: "hf_" + s(ALNUM, 34)),
        ("npm", "NPM", lambda: (lambda b: "npm_" + b + g.crc_b62(b))(s(ALNUM, 30))),
        ("PyPI", "PYPI", lambda: "pypi-AgEIcHlwaS5vcmc" + s(B64URL, 70)),
        ("Shopify", "SHOPIFY_ACCESS", lambda: "shpat_" + h(32)),
        ("Mailgun", "MAILGUN", lambda: "key-" + h(32)),
        ("Twilio", "TWILIO_API", lambda: "SK" + h(32)),
        ("DigitalOcean", "DIGITALOCEAN", lambda: "dop_v1_" + h(64)),
        ("Doppler", "DOPPLER", lambda: "dp.st." + s(ALNUM, 43)),
        ("Linear", "LINEAR", lambda: "lin_api_" + s(ALNUM, 40)),
        ("Postman", "POSTMAN", lambda: f"PMAK-{h(24)}-{h(34)}"),
        ("Grafana", "GRAFANA", lambda: "glsa_" + s(ALNUM, 32) + "_" + h(8)),
        ("Pulumi", "PULUMI", lambda: "pul-" + h(40)),
        ("Tailscale", "TAILSCALE", lambda: f"tskey-auth-{s(ALNUM, 17)}-{s(ALNUM, 33)}"),
        ("Vault", "VAULT", lambda: "hvs." + s(B64URL, 90)),
        ("Atlassian", "ATLASSIAN", lambda: "ATATT3xFfGF0" + s(B64URL, 170) + "=" + s(UPNUM, 8)),
        ("Sonar", "SONAR", lambda: "squ_" + h(40)),
        ("Databricks", "DATABRICKS", lambda: "dapi" + h(32)),
        ("Square", "SQUARE_ACCESS", lambda: "EAAA" + s(B64URL, 60)),
        ("Telegram", "TELEGRAM_BOT", lambda: f"{g.r.randint(1000000000, 7999999999)}:AA{s(B64URL, 33)}"),
        ("Notion", "NOTION", lambda: "secret_" + s(ALNUM, 43)),
        ("Airtable", "AIRTABLE", lambda: f"pat{s(ALNUM, 14)}.{h(64)}"),
        ("Groq", "GROQ", lambda: "gsk_" + s(ALNUM, 52)),
        ("Replicate", "REPLICATE", lambda: "r8_" + s(ALNUM, 37)),
        ("Perplexity", "PERPLEXITY", lambda: "pplx-" + s(ALNUM, 48)),
        ("Shippo", "SHIPPO", lambda: "shippo_live_" + h(40)),
        ("Dynatrace", "DYNATRACE", lambda: f"dt0c01.{s(UPNUM, 24)}.{s(UPNUM, 64)}"),
        ("Octopus Deploy", "OCTOPUS", lambda: "API-" + s(UPNUM, 26)),
        # Vendors whose keys are plain random strings (the long tail).
        ("languagelayer", "LANGUAGELAYER", lambda: s(LOWNUM, 32)),
        ("ipstack", "IPSTACK", lambda: h(32)),
        ("weatherstack", "WEATHERSTACK", lambda: h(32)),
        ("Marketstack", "MARKETSTACK", lambda: h(32)),
        ("Siteleaf", "SITELEAF", lambda: s(LOWNUM, 32)),
        ("ScrapingBee", "SCRAPINGBEE", lambda: s(UPNUM, 80)),
        ("ScraperAPI", "SCRAPERAPI", lambda: h(32)),
        ("ZenRows", "ZENROWS", lambda: h(40)),
        ("Apify", "APIFY", lambda: "apify_api_" + s(ALNUM, 36)),
        ("Mailchimp", "MAILCHIMP", lambda: h(32) + "-us" + str(g.r.randint(1, 21))),
        ("Mailjet", "MAILJET_SECRET", lambda: h(32)),
        ("Postmark", "POSTMARK_SERVER", lambda: g.uuid()),
        ("Brevo", "BREVO", lambda: "xkeysib-" + h(64) + "-" + s(ALNUM, 16)),
        ("SparkPost", "SPARKPOST", lambda: h(40)),
        ("Mandrill", "MANDRILL", lambda: s(B64URL, 22)),
        ("Klaviyo", "KLAVIYO_PRIVATE", lambda: "pk_" + h(34)),
        ("ConvertKit", "CONVERTKIT_SECRET", lambda: s(ALNUM, 43)),
        ("MailerLite", "MAILERLITE", lambda: h(32)),
        ("Algolia", "ALGOLIA_ADMIN", lambda: h(32)),
        ("Pusher", "PUSHER_APP_SECRET", lambda: h(20)),
        ("PubNub", "PUBNUB_SECRET", lambda: "sec-c-" + s(B64, 48)),
        ("Ably", "ABLY", lambda: f"{s(ALNUM, 6)}.{s(ALNUM, 6)}:{s(B64URL, 43)}"),
        ("OneSignal", "ONESIGNAL_REST_API", lambda: s(B64, 48)),
        ("Mapbox", "MAPBOX_SECRET", lambda: f"sk.eyJ1Ijoi{s(B64URL, 30)}.{s(B64URL, 22)}"),
        ("HERE", "HERE_API", lambda: s(B64URL, 43)),
        ("TomTom", "TOMTOM", lambda: s(ALNUM, 32)),
        ("OpenWeatherMap", "OPENWEATHERMAP", lambda: h(32)),
        ("WeatherAPI", "WEATHERAPI", lambda: h(31)),
        ("AccuWeather", "ACCUWEATHER", lambda: s(ALNUM, 32)),
        ("Tomorrow.io", "TOMORROW_IO", lambda: s(ALNUM, 32)),
        ("Geocodio", "GEOCODIO", lambda: h(39)),
        ("OpenCage", "OPENCAGE", lambda: h(32)),
        ("LocationIQ", "LOCATIONIQ", lambda: "pk." + h(32)),
        ("ipinfo", "IPINFO", lambda: h(14)),
        ("IPGeolocation", "IPGEOLOCATION", lambda: h(32)),
        ("MaxMind", "MAXMIND_LICENSE", lambda: s(ALNUM, 6) + "_" + s(ALNUM, 29) + "_mmk"),
        ("Abstract API", "ABSTRACT_API", lambda: h(32)),
        ("NewsAPI", "NEWSAPI", lambda: h(32)),
        ("Alpha Vantage", "ALPHAVANTAGE", lambda: s(UPNUM, 16)),
        ("Finnhub", "FINNHUB", lambda: s(LOWNUM, 20)),
        ("Polygon.io", "POLYGON", lambda: s(ALNUM, 32)),
        ("Tiingo", "TIINGO", lambda: h(40)),
        ("Twelve Data", "TWELVEDATA", lambda: h(32)),
        ("IEX Cloud", "IEX_CLOUD", lambda: "sk_" + h(32)),
        ("CoinMarketCap", "COINMARKETCAP", lambda: g.uuid()),
        ("CoinGecko", "COINGECKO", lambda: "CG-" + s(ALNUM, 24)),
        ("Etherscan", "ETHERSCAN", lambda: s(UPNUM, 34)),
        ("Infura", "INFURA_PROJECT_SECRET", lambda: h(32)),
        ("Alchemy", "ALCHEMY", lambda: s(B64URL, 32)),
        ("Moralis", "MORALIS", lambda: s(ALNUM, 64)),
        ("Binance", "BINANCE_SECRET", lambda: s(ALNUM, 64)),
        ("Coinbase", "COINBASE_API_SECRET", lambda: s(ALNUM, 32)),
        ("Kraken", "KRAKEN_PRIVATE", lambda: g.b64bytes(64)),
        ("Plaid", "PLAID_SECRET", lambda: h(30)),
        ("Braintree", "BRAINTREE_PRIVATE", lambda: h(32)),
        ("PayPal", "PAYPAL_CLIENT_SECRET", lambda: s(B64URL, 80)),
        ("Razorpay", "RAZORPAY_KEY_SECRET", lambda: s(ALNUM, 24)),
        ("Paystack", "PAYSTACK_SECRET", lambda: "sk_live_" + h(40)),
        ("Flutterwave", "FLUTTERWAVE_SECRET", lambda: "FLWSECK-" + h(32) + "-X"),
        ("Mollie", "MOLLIE", lambda: "live_" + s(ALNUM, 30)),
        ("GoCardless", "GOCARDLESS_ACCESS", lambda: "live_" + s(B64URL, 40)),
        ("Adyen", "ADYEN", lambda: "AQE" + s(B64URL, 120)),
        ("Chargebee", "CHARGEBEE", lambda: "live_" + s(ALNUM, 34)),
        ("Recurly", "RECURLY_PRIVATE", lambda: h(32)),
        ("Paddle", "PADDLE", lambda: h(50)),
        ("Lemon Squeezy", "LEMONSQUEEZY", lambda: g.jwt("RS256", aud="1")),
        ("EasyPost", "EASYPOST", lambda: "EZAK" + h(54)),
        ("ShipStation", "SHIPSTATION_API_SECRET", lambda: h(32)),
        ("AfterShip", "AFTERSHIP", lambda: "asat_" + h(32)),
        ("TaxJar", "TAXJAR", lambda: h(32)),
        ("Avalara", "AVALARA_LICENSE", lambda: s(UPNUM, 16)),
        ("HubSpot", "HUBSPOT_PRIVATE_APP", lambda: f"pat-na1-{g.uuid()}"),
        ("Pipedrive", "PIPEDRIVE", lambda: h(40)),
        ("Salesforce", "SALESFORCE_CLIENT_SECRET", lambda: s(UPNUM, 64)),
        ("Zendesk", "ZENDESK", lambda: s(ALNUM, 40)),
        ("Freshdesk", "FRESHDESK", lambda: s(ALNUM, 20)),
        ("Intercom", "INTERCOM_ACCESS", lambda: "dG9rOj" + s(B64URL, 54) + "="),
        ("Help Scout", "HELPSCOUT_APP_SECRET", lambda: s(ALNUM, 32)),
        ("Front", "FRONT", lambda: g.jwt("HS256", scopes=["shared:*"], iss="front")),
        ("Calendly", "CALENDLY", lambda: g.jwt("ES256", iss="https://auth.calendly.com")),
        ("Typeform", "TYPEFORM", lambda: "tfp_" + s(ALNUM, 44) + "_" + s(ALNUM, 14)),
        ("SurveyMonkey", "SURVEYMONKEY_ACCESS", lambda: s(B64URL, 60)),
        ("Jotform", "JOTFORM", lambda: h(32)),
        ("Asana", "ASANA", lambda: f"2/{s(DIGITS, 16)}/{s(DIGITS, 16)}:{h(32)}"),
        ("ClickUp", "CLICKUP", lambda: f"pk_{s(DIGITS, 8)}_{s(UPNUM, 32)}"),
        ("monday.com", "MONDAY", lambda: g.jwt("HS256", tid=g.r.randint(10**8, 10**9), uid=g.r.randint(10**7, 10**8))),
        ("Trello", "TRELLO", lambda: h(64)),
        ("Todoist", "TODOIST", lambda: h(40)),
        ("Wrike", "WRIKE_PERMANENT", lambda: g.jwt("HS256", i=g.r.randint(10**6, 10**7), c=g.r.randint(10**6, 10**7))),
        ("Smartsheet", "SMARTSHEET_ACCESS", lambda: s(ALNUM, 37)),
        ("Basecamp", "BASECAMP_ACCESS", lambda: s(B64URL, 300)),
        ("Miro", "MIRO_ACCESS", lambda: "eyJtaXJvLm9yaWdpbiI6ImV1MDEifQ_" + s(B64URL, 27)),
        ("Figma", "FIGMA", lambda: "figd_" + s(B64URL, 40)),
        ("Dropbox", "DROPBOX_ACCESS", lambda: "sl." + s(B64URL, 136)),
        ("Box", "BOX_DEVELOPER", lambda: s(ALNUM, 32)),
        ("DocuSign", "DOCUSIGN_SECRET", lambda: g.uuid()),
        ("PandaDoc", "PANDADOC", lambda: h(40)),
        ("Zapier", "ZAPIER_NLA", lambda: "sk-ak-" + s(ALNUM, 32)),
        ("Twitch", "TWITCH_CLIENT_SECRET", lambda: s(LOWNUM, 30)),
        ("Spotify", "SPOTIFY_CLIENT_SECRET", lambda: h(32)),
        ("YouTube", "YOUTUBE_DATA", lambda: "AIza" + s(B64URL, 35)),
        ("Twitter", "TWITTER_CONSUMER_SECRET", lambda: s(ALNUM, 50)),
        ("Reddit", "REDDIT_CLIENT_SECRET", lambda: s(B64URL, 30)),
        ("Discord", "DISCORD_CLIENT_SECRET", lambda: s(B64URL, 32)),
        ("LinkedIn", "LINKEDIN_CLIENT_SECRET", lambda: s(ALNUM, 16)),
        ("Pinterest", "PINTEREST_APP_SECRET", lambda: h(40)),
        ("Vimeo", "VIMEO_ACCESS", lambda: h(32)),
        ("Unsplash", "UNSPLASH_SECRET", lambda: s(B64URL, 43)),
        ("Giphy", "GIPHY", lambda: s(ALNUM, 32)),
        ("Cloudinary", "CLOUDINARY_API_SECRET", lambda: s(B64URL, 27)),
        ("ImageKit", "IMAGEKIT_PRIVATE", lambda: "private_" + s(B64, 28)),
        ("Uploadcare", "UPLOADCARE_SECRET", lambda: h(20)),
        ("Mux", "MUX_TOKEN_SECRET", lambda: s(B64, 75)),
        ("Agora", "AGORA_APP_CERTIFICATE", lambda: h(32)),
        ("Daily", "DAILY", lambda: h(64)),
        ("Vonage", "VONAGE_API_SECRET", lambda: s(ALNUM, 16)),
        ("Plivo", "PLIVO_AUTH", lambda: s(ALNUM, 40)),
        ("Sinch", "SINCH_KEY_SECRET", lambda: s(B64URL, 30)),
        ("MessageBird", "MESSAGEBIRD_ACCESS", lambda: s(ALNUM, 25)),
        ("Telnyx", "TELNYX", lambda: "KEY" + s(UPNUM, 32) + "_" + s(ALNUM, 22)),
        ("ClickSend", "CLICKSEND", lambda: s(UPNUM, 36)),
        ("Infobip", "INFOBIP", lambda: h(32) + "-" + g.uuid()),
        ("RingCentral", "RINGCENTRAL_CLIENT_SECRET", lambda: s(B64URL, 43)),
        ("Datadog", "DATADOG", lambda: h(32)),
        ("New Relic", "NEW_RELIC_LICENSE", lambda: h(36) + "NRAL"),
        ("Sentry", "SENTRY_AUTH", lambda: "sntrys_" + s(B64URL, 120)),
        ("Bugsnag", "BUGSNAG", lambda: h(32)),
        ("Rollbar", "ROLLBAR_ACCESS", lambda: h(32)),
        ("Honeybadger", "HONEYBADGER", lambda: "hbp_" + s(ALNUM, 36)),
        ("Loggly", "LOGGLY", lambda: g.uuid()),
        ("Papertrail", "PAPERTRAIL", lambda: s(ALNUM, 20)),
        ("Logz.io", "LOGZIO", lambda: s(ALNUM, 32)),
        ("Honeycomb", "HONEYCOMB", lambda: "hcaik_" + s(LOWNUM, 58)),
        ("PagerDuty", "PAGERDUTY", lambda: "u+" + s(B64URL, 18)),
        ("Opsgenie", "OPSGENIE", lambda: g.uuid()),
        ("UptimeRobot", "UPTIMEROBOT", lambda: f"u{s(DIGITS, 7)}-{h(24)}"),
        ("Checkly", "CHECKLY", lambda: "cu_" + h(32)),
        ("BrowserStack", "BROWSERSTACK_ACCESS", lambda: s(ALNUM, 20)),
        ("Sauce Labs", "SAUCE_ACCESS", lambda: g.uuid()),
        ("LaunchDarkly", "LAUNCHDARKLY_SDK", lambda: "sdk-" + g.uuid()),
        ("Optimizely", "OPTIMIZELY", lambda: "2:" + s(B64URL, 50)),
        ("Mixpanel", "MIXPANEL_API_SECRET", lambda: h(32)),
        ("Amplitude", "AMPLITUDE_SECRET", lambda: h(32)),
        ("PostHog", "POSTHOG_PERSONAL_API", lambda: "phx_" + s(ALNUM, 43)),
        ("FullStory", "FULLSTORY", lambda: "na1." + s(B64, 60)),
        ("CircleCI", "CIRCLECI", lambda: "CCIPAT_" + s(ALNUM, 22) + "_" + h(40)),
        ("Travis CI", "TRAVIS", lambda: s(B64URL, 22)),
        ("Buildkite", "BUILDKITE", lambda: "bkua_" + h(40)),
        ("Codecov", "CODECOV", lambda: g.uuid()),
        ("Coveralls", "COVERALLS_REPO", lambda: s(ALNUM, 33)),
        ("Snyk", "SNYK", lambda: g.uuid()),
        ("Netlify", "NETLIFY_AUTH", lambda: "nfp_" + s(ALNUM, 36)),
        ("Vercel", "VERCEL", lambda: s(ALNUM, 24)),
        ("Heroku", "HEROKU_API", lambda: "HRKU-" + s(B64URL, 60)),
        ("Render", "RENDER_API", lambda: "rnd_" + s(ALNUM, 32)),
        ("Fly.io", "FLY_API", lambda: "FlyV1 fm2_" + s(B64URL, 120)),
        ("Railway", "RAILWAY", lambda: g.uuid()),
        ("Cloudflare", "CLOUDFLARE_API", lambda: s(B64URL, 40)),
        ("Fastly", "FASTLY_API", lambda: s(B64URL, 32)),
        ("Linode", "LINODE", lambda: h(64)),
        ("Vultr", "VULTR_API", lambda: s(UPNUM, 36)),
        ("Hetzner", "HCLOUD", lambda: s(ALNUM, 64)),
        ("Scaleway", "SCW_SECRET", lambda: g.uuid()),
        ("OVH", "OVH_APPLICATION_SECRET", lambda: s(ALNUM, 32)),
        ("Backblaze", "B2_APPLICATION", lambda: "K005" + s(B64, 27)),
        ("Wasabi", "WASABI_SECRET", lambda: s(ALNUM, 40)),
        ("IBM Cloud", "IBMCLOUD_API", lambda: s(B64URL, 44)),
        ("Alibaba Cloud", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", lambda: s(ALNUM, 30)),
        ("Tencent Cloud", "TENCENTCLOUD_SECRET", lambda: s(ALNUM, 32)),
        ("Supabase", "SUPABASE_SERVICE_ROLE", lambda: "sbp_" + h(40)),
        ("PlanetScale", "PLANETSCALE_SERVICE_TOKEN", lambda: "pscale_tkn_" + s(B64URL, 43)),
        ("Neon", "NEON_API", lambda: "napi_" + s(LOWNUM, 64)),
        ("MongoDB Atlas", "MONGODB_ATLAS_PRIVATE", lambda: g.uuid()),
        ("Redis Cloud", "REDIS", lambda: s(ALNUM, 32)),
        ("Elastic Cloud", "ELASTIC_CLOUD_API", lambda: s(B64, 60) + "=="),
        ("Pinecone", "PINECONE", lambda: "pcsk_" + s(ALNUM, 6) + "_" + s(ALNUM, 64)),
        ("Weaviate", "WEAVIATE", lambda: s(ALNUM, 40)),
        ("Qdrant", "QDRANT", lambda: s(B64URL, 40)),
        ("Cohere", "COHERE", lambda: s(ALNUM, 40)),
        ("Mistral", "MISTRAL", lambda: s(ALNUM, 32)),
        ("Together AI", "TOGETHER", lambda: h(64)),
        ("Fireworks AI", "FIREWORKS", lambda: "fw_" + s(ALNUM, 24)),
        ("DeepSeek", "DEEPSEEK", lambda: "sk-" + h(32)),
        ("ElevenLabs", "ELEVENLABS", lambda: "sk_" + h(48)),
        ("AssemblyAI", "ASSEMBLYAI", lambda: h(32)),
        ("Deepgram", "DEEPGRAM", lambda: h(40)),
        ("Stability AI", "STABILITY", lambda: "sk-" + s(ALNUM, 48)),
        ("Clarifai", "CLARIFAI_PAT", lambda: h(32)),
        ("Weights & Biases", "WANDB", lambda: h(40)),
        ("LangSmith", "LANGSMITH", lambda: f"lsv2_pt_{h(32)}_{h(10)}"),
        ("DeepL", "DEEPL_AUTH", lambda: g.uuid() + ":fx"),
        ("Tavily", "TAVILY", lambda: "tvly-" + s(ALNUM, 32)),
        ("SerpApi", "SERPAPI", lambda: h(64)),
        ("Shodan", "SHODAN", lambda: s(ALNUM, 32)),
        ("VirusTotal", "VIRUSTOTAL", lambda: h(64)),
        ("Censys", "CENSYS_API_SECRET", lambda: s(ALNUM, 32)),
        ("AbuseIPDB", "ABUSEIPDB", lambda: h(80)),
        ("Have I Been Pwned", "HIBP", lambda: h(32)),
        ("Okta", "OKTA_API", lambda: "00" + s(B64URL, 40)),
        ("Auth0", "AUTH0_CLIENT_SECRET", lambda: s(B64URL, 64)),
        ("Clerk", "CLERK_SECRET", lambda: "sk_live_" + s(ALNUM, 40)),
        ("Stytch", "STYTCH_SECRET", lambda: "secret-live-" + s(B64URL, 36)),
        ("WorkOS", "WORKOS_API", lambda: "sk_" + s(ALNUM, 40)),
        ("Contentful", "CONTENTFUL_MANAGEMENT", lambda: "CFPAT-" + s(B64URL, 43)),
        ("Sanity", "SANITY_API", lambda: "sk" + s(ALNUM, 180)),
        ("Storyblok", "STORYBLOK", lambda: s(ALNUM, 22) + "tt"),
        ("Prismic", "PRISMIC_ACCESS", lambda: "MC5" + s(B64URL, 60)),
        ("Strapi", "STRAPI_API", lambda: h(256)),
        ("Ghost", "GHOST_ADMIN_API", lambda: h(24) + ":" + h(64)),
        ("WordPress", "WP_APPLICATION_PASSWORD", lambda: " ".join(s(ALNUM, 4) for _ in range(6))),
        ("Webflow", "WEBFLOW", lambda: h(64)),
        ("BigCommerce", "BIGCOMMERCE_ACCESS", lambda: s(LOWNUM, 31)),
        ("WooCommerce", "WOOCOMMERCE_CONSUMER_SECRET", lambda: "cs_" + h(40)),
        ("Etsy", "ETSY", lambda: s(LOWNUM, 24)),
        ("eBay", "EBAY_CLIENT_SECRET", lambda: "PRD-" + h(12) + "-" + h(8)),
        ("Gumroad", "GUMROAD_ACCESS", lambda: s(B64URL, 43)),
        ("Printful", "PRINTFUL", lambda: s(ALNUM, 40)),
        ("QuickBooks", "QUICKBOOKS_CLIENT_SECRET", lambda: s(ALNUM, 40)),
        ("Xero", "XERO_CLIENT_SECRET", lambda: s(B64URL, 48)),
        ("FreshBooks", "FRESHBOOKS_CLIENT_SECRET", lambda: h(64)),
        ("Harvest", "HARVEST_ACCESS", lambda: f"{s(DIGITS, 7)}.pt.{s(B64URL, 86)}"),
        ("Toggl", "TOGGL_API", lambda: h(32)),
        ("Clockify", "CLOCKIFY", lambda: s(ALNUM, 48)),
        ("BambooHR", "BAMBOOHR", lambda: h(40)),
        ("Greenhouse", "GREENHOUSE_HARVEST", lambda: h(32) + "-" + s(DIGITS, 1)),
        ("Lever", "LEVER", lambda: s(ALNUM, 40)),
        ("Gusto", "GUSTO_CLIENT_SECRET", lambda: s(B64URL, 43)),
        ("Deel", "DEEL", lambda: s(ALNUM, 40)),
        ("Amadeus", "AMADEUS_CLIENT_SECRET", lambda: s(ALNUM, 16)),
        ("Duffel", "DUFFEL_ACCESS", lambda: "duffel_live_" + s(B64URL, 43)),
        ("Ticketmaster", "TICKETMASTER", lambda: s(ALNUM, 32)),
        ("Eventbrite", "EVENTBRITE_PRIVATE", lambda: s(UPNUM, 20)),
        ("Yelp", "YELP", lambda: s(B64URL, 128)),
        ("Foursquare", "FOURSQUARE", lambda: "fsq3" + s(B64, 44)),
        ("TMDB", "TMDB", lambda: h(32)),
        ("Last.fm", "LASTFM_SECRET", lambda: h(32)),
        ("RAWG", "RAWG", lambda: h(32)),
        ("Steam", "STEAM_WEB", lambda: s(UPNUM, 32)),
        ("Riot Games", "RIOT", lambda: "RGAPI-" + g.uuid()),
        ("Rebrandly", "REBRANDLY", lambda: h(32)),
        ("Bitly", "BITLY_ACCESS", lambda: h(40)),
        ("Browserless", "BROWSERLESS", lambda: s(ALNUM, 40)),
        ("PDFShift", "PDFSHIFT", lambda: "sk_" + h(40)),
        ("CloudConvert", "CLOUDCONVERT", lambda: g.jwt("RS256", aud="1", scopes=["task.read", "task.write"])),
        ("ConvertAPI", "CONVERTAPI_SECRET", lambda: s(ALNUM, 16)),
        ("RapidAPI", "RAPIDAPI", lambda: h(10) + "msh" + h(15) + "p1" + h(6) + "jsn" + h(12)),
        ("ngrok", "NGROK_AUTH", lambda: s(ALNUM, 27) + "_" + s(ALNUM, 21)),
        ("JFrog Artifactory", "ARTIFACTORY", lambda: "AKCp" + s(ALNUM, 69)),
        ("Docker Hub", "DOCKERHUB", lambda: "dckr_pat_" + s(B64URL, 27)),
        ("Terraform Cloud", "TFE", lambda: s(ALNUM, 14) + ".atlasv1." + s(ALNUM, 67)),
        ("Particle", "PARTICLE_ACCESS", lambda: h(40)),
        ("Adafruit IO", "ADAFRUIT_IO", lambda: "aio_" + s(ALNUM, 28)),
        ("Home Assistant", "HASS", lambda: g.jwt("HS256", iss=g.hex(32))),
    ]
    return out


# ---- Where keys are written: each template renders (path, text) ---------------------------------
# `var` is an environment-variable style name (SCRAPINGBEE_API_KEY), `name` a display name.

def snake(var):
    return var.lower()


def camel(var):
    parts = var.lower().split("_")
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


def pascal(var):
    return "".join(p.capitalize() for p in var.lower().split("_"))


def kebab(var):
    return var.lower().replace("_", "-")


def slug(name):
    return "".join(c for c in name.lower() if c.isalnum())


def templates(g):
    r = g.r
    host = lambda name: f"api.{slug(name)}.com"
    t = []

    def add(kind, fn):
        t.append((kind, fn))

    # Configuration.
    add("env", lambda n, v, k: (".env", f"# {n}\nAPP_ENV=production\n{v}={k}\nLOG_LEVEL=info\n"))
    add("env", lambda n, v, k: ("deploy/.env.production", f'NODE_ENV=production\n{v}="{k}"\n'))
    add("yaml", lambda n, v, k: ("config/services.yml", f"{slug(n)}:\n  enabled: true\n  api_key: {k}\n  timeout: 30\n"))
    add("yaml", lambda n, v, k: ("config/application.yaml", f"integrations:\n  {slug(n)}:\n    base_url: https://{host(n)}/v1\n    token: \"{k}\"\n"))
    add("yaml", lambda n, v, k: ("docker-compose.yml", f"services:\n  worker:\n    image: acme/worker:1.4\n    environment:\n      - {v}={k}\n      - QUEUE=default\n"))
    add("json", lambda n, v, k: ("config/settings.json", json.dumps({"service": slug(n), "credentials": {"apiKey": k}, "retries": 3}, indent=2) + "\n"))
    add("json", lambda n, v, k: ("appsettings.Production.json", json.dumps({"Logging": {"LogLevel": {"Default": "Warning"}}, pascal(v.split("_")[0]): {"ApiKey": k}}, indent=2) + "\n"))
    add("toml", lambda n, v, k: ("config.toml", f"[server]\nport = 8080\n\n[{slug(n)}]\napi_key = \"{k}\"\n"))
    add("ini", lambda n, v, k: ("settings.ini", f"[general]\ndebug = false\n\n[{slug(n)}]\nsecret = {k}\n"))
    add("properties", lambda n, v, k: ("src/main/resources/application.properties", f"server.port=8080\n{slug(n)}.api.key={k}\n"))
    add("xml", lambda n, v, k: ("Web.config", f'<configuration>\n  <appSettings>\n    <add key="{pascal(v)}" value="{k}" />\n  </appSettings>\n</configuration>\n'))
    add("xml", lambda n, v, k: ("src/main/resources/config.xml", f"<config>\n  <{slug(n)}>\n    <apiKey>{k}</apiKey>\n  </{slug(n)}>\n</config>\n"))
    add("k8s", lambda n, v, k: ("k8s/deployment.yaml", f"apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - name: api\n          env:\n            - name: {v}\n              value: \"{k}\"\n"))
    add("terraform", lambda n, v, k: ("infra/terraform.tfvars", f'region = "us-east-1"\n{snake(v)} = "{k}"\n'))
    # Code in ten languages.
    add("python", lambda n, v, k: ("app/clients.py", f'import requests\n\n{v} = "{k}"\n\ndef fetch(q):\n    return requests.get("https://{host(n)}/v1/search", params={{"q": q}}, headers={{"Authorization": f"Bearer {{{v}}}"}})\n'))
    add("python", lambda n, v, k: ("scripts/sync.py", f"client = {pascal(slug(n))}Client(api_key='{k}')\nclient.sync()\n"))
    add("javascript", lambda n, v, k: ("src/lib/client.js", f"const {camel(v)} = '{k}';\n\nexport async function get(path) {{\n  return fetch(`https://{host(n)}${{path}}`, {{ headers: {{ 'X-Api-Key': {camel(v)} }} }});\n}}\n"))
    add("typescript", lambda n, v, k: ("src/config.ts", f"export const config = {{\n  {slug(n)}: {{\n    apiKey: \"{k}\",\n    region: \"eu\",\n  }},\n}};\n"))
    add("go", lambda n, v, k: ("internal/client/client.go", f'package client\n\nconst {pascal(v)} = "{k}"\n\nfunc New() *Client {{ return &Client{{key: {pascal(v)}}} }}\n'))
    add("go", lambda n, v, k: ("cmd/main.go", f'package main\n\nfunc main() {{\n\treq, _ := http.NewRequest("GET", "https://{host(n)}/v2/items", nil)\n\treq.Header.Set("Authorization", "Bearer {k}")\n}}\n'))
    add("java", lambda n, v, k: (f"src/main/java/com/acme/{pascal(slug(n))}Config.java", f'package com.acme;\n\npublic class {pascal(slug(n))}Config {{\n    private static final String {v} = "{k}";\n}}\n'))
    add("ruby", lambda n, v, k: ("config/initializers/client.rb", f"{pascal(slug(n))}.configure do |c|\n  c.api_key = '{k}'\nend\n"))
    add("php", lambda n, v, k: ("config/services.php", f"<?php\nreturn [\n    '{slug(n)}' => [\n        'secret' => '{k}',\n    ],\n];\n"))
    add("csharp", lambda n, v, k: ("Services/ApiClient.cs", f'public class ApiClient\n{{\n    private const string {pascal(v)} = "{k}";\n}}\n'))
    add("rust", lambda n, v, k: ("src/client.rs", f'const {v}: &str = "{k}";\n\npub fn client() -> Client {{ Client::new({v}) }}\n'))
    add("kotlin", lambda n, v, k: ("app/src/main/kotlin/Api.kt", f'object Api {{\n    const val {v} = "{k}"\n}}\n'))
    add("swift", lambda n, v, k: ("App/Secrets.swift", f'enum Secrets {{\n    static let {camel(v)} = "{k}"\n}}\n'))
    add("shell", lambda n, v, k: ("scripts/deploy.sh", f"#!/usr/bin/env bash\nset -euo pipefail\nexport {v}='{k}'\n./deploy --env prod\n"))
    add("curl", lambda n, v, k: ("scripts/check.sh", f"curl -sS -H \"Authorization: Bearer {k}\" https://{host(n)}/v1/status\n"))
    add("curl", lambda n, v, k: ("notes/api.txt", f"curl 'https://{host(n)}/v1/lookup?access_key={k}&query=1.1.1.1'\n"))
    add("http", lambda n, v, k: ("requests.http", f"GET https://{host(n)}/v1/me\nX-Api-Key: {k}\nAccept: application/json\n"))
    # Documentation, logs, history.
    add("docs", lambda n, v, k: ("docs/setup.md", f"# Setup\n\nSet the {n} key before you start the worker:\n\n```sh\nexport {v}={k}\n```\n"))
    add("log", lambda n, v, k: ("logs/worker.txt", f"2024-05-02T10:11:12Z INFO starting\n2024-05-02T10:11:13Z DEBUG {n} client configured with key={k}\n"))
    add("history", lambda n, v, k: (".bash_history", f"ls -la\n{slug(n)} login --token {k}\ngit status\n"))
    add("text", lambda n, v, k: ("notes.txt", f"{n} token: {k}\n"))
    # CI.
    add("ci", lambda n, v, k: (".github/workflows/deploy.yml", f"name: deploy\non: push\njobs:\n  deploy:\n    runs-on: ubuntu-latest\n    env:\n      {v}: {k}\n    steps:\n      - run: ./deploy.sh\n"))
    add("ci", lambda n, v, k: (".gitlab-ci.yml", f"variables:\n  {v}: \"{k}\"\ndeploy:\n  script:\n    - ./deploy.sh\n"))
    add("ci", lambda n, v, k: ("Jenkinsfile", f"pipeline {{\n  agent any\n  environment {{\n    {v} = '{k}'\n  }}\n  stages {{ stage('d') {{ steps {{ sh './deploy.sh' }} }} }}\n}}\n"))
    return t


SUFFIXES = ["_API_KEY", "_TOKEN", "_SECRET", "_KEY", "_ACCESS_TOKEN", "_API_TOKEN", "_AUTH_TOKEN"]


def var_for(stem, r):
    # Stems that already say what they are keep their word (STRIPE_SECRET_KEY, DEEPL_AUTH_KEY).
    if stem.endswith(("_SECRET", "_KEY", "_TOKEN", "_ACCESS", "_AUTH", "_PRIVATE", "_API", "_PAT", "_LICENSE", "_APP_SECRET")):
        return stem + r.choice(["_KEY", "_TOKEN"]) if not stem.endswith(("_SECRET", "_KEY", "_TOKEN")) else stem
    return stem + r.choice(SUFFIXES)


# ---- Negatives -------------------------------------------------------------------------------

def negative_values(g, n, v):
    """Values that sit where keys go but are not keys."""
    r = g.r
    return [
        f"${{{v}}}",
        f"<your-{slug(n)}-api-key>",
        "YOUR_API_KEY_HERE",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "changeme",
        "REDACTED",
        "********",
        f"{{{{ .Values.{camel(v)} }}}}",
        "%(" + v + ")s",
        "$" + v,
        "<redacted>",
        "test",
    ]


def negative_items(g, svcs, tmpls):
    """(kind, path, text) of realistic files with no credential in them."""
    r = g.r
    out = []
    # Templates with placeholders and references instead of keys.
    for name, stem, _ in svcs:
        v = var_for(stem, r)
        kind, fn = r.choice(tmpls)
        path, text = fn(name, v, r.choice(negative_values(g, name, v)))
        out.append(("placeholder-" + kind, path, text))
    # Code that reads the key from the environment.
    for name, stem, _ in svcs[: len(svcs) // 2]:
        v = var_for(stem, r)
        out.append(("env-reference", "app/settings.py", f'import os\n\n{v} = os.environ["{v}"]\n{snake(v)}_url = "https://{slug(name)}.com/api"\n'))
        out.append(("env-reference", "src/env.ts", f"export const {camel(v)} = process.env.{v} ?? '';\n"))
        out.append(("env-reference", ".github/workflows/ci.yml", f"jobs:\n  test:\n    env:\n      {v}: ${{{{ secrets.{v} }}}}\n"))
    # Hashes, identifiers and other random-looking values that are not secrets.
    for i in range(len(svcs)):
        name = svcs[i][0]
        out.append(("lockfile", "package-lock.json", json.dumps({"packages": {f"node_modules/{slug(name)}": {"version": "1.2.3", "resolved": f"https://registry.npmjs.org/{slug(name)}/-/{slug(name)}-1.2.3.tgz", "integrity": "sha512-" + g.b64bytes(64)}}}, indent=2) + "\n"))
        out.append(("hash", "checksums.txt", f"{hashlib.sha256(g.s(ALNUM, 20).encode()).hexdigest()}  {slug(name)}-1.2.3.tar.gz\n"))
        out.append(("ids", "config/app.yaml", f"{slug(name)}:\n  request_id: {g.uuid()}\n  build: {g.hex(40)}\n  region: eu-west-1\n"))
        out.append(("commit", "CHANGELOG.md", f"## 1.4.0\n\n- {name} client retries on 429 ({g.hex(40)[:12]})\n- bump deps ({g.hex(40)})\n"))
        out.append(("code", f"src/{slug(name)}/mod.rs", f"pub fn {slug(name)}_key(id: &str) -> String {{\n    format!(\"{slug(name)}:{{id}}\")\n}}\n\nconst CACHE_KEY_PREFIX: &str = \"{slug(name)}_cache_v2\";\n"))
        out.append(("code", f"lib/{slug(name)}.js", f"const tokenizer = new Tokenizer();\nconst key = `${{prefix}}:{slug(name)}`;\nif (apiKey == null) throw new Error('{name} API key missing: set {svcs[i][1]}_API_KEY');\n"))
    # Public by design and documented examples.
    for i in range(40):
        out.append(("public", "src/firebase.js", f"const firebaseConfig = {{\n  apiKey: \"AIza{g.s(B64URL, 35)}\",\n  authDomain: \"acme-{i}.firebaseapp.com\",\n  projectId: \"acme-{i}\",\n  messagingSenderId: \"{g.s(DIGITS, 12)}\",\n}};\n"))
        out.append(("public", "web/checkout.js", f"const stripe = Stripe('pk_live_{g.s(ALNUM, 99)}');\n"))
        out.append(("example-jwt", "docs/auth.md", "Send the token in the header, for example:\n\n    Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c\n"))  # rw:allow
        out.append(("example", "docs/aws.md", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"))
        out.append(("public", "keys/deploy.pub", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.s(B64, 43)} deploy@acme\n"))
        out.append(("words", "README.md", "## Configuration\n\n| variable | meaning |\n|---|---|\n| `API_KEY` | your key from the dashboard |\n| `password` | the password of the admin user |\n| `token` | a personal access token with `repo` scope |\n"))
    return out


# ---- Generate and score --------------------------------------------------------------------------

def generate(out_dir, seed, per_service):
    r = random.Random(seed)
    g = Gen(r)
    svcs = services(g)
    tmpls = templates(g)
    files = os.path.join(out_dir, "files")
    if os.path.exists(files):
        shutil.rmtree(files)
    os.makedirs(files)
    labels = []

    def write(positive, kind, service, path, text):
        n = len(labels)
        full = os.path.join(files, f"{n:05d}", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
        labels.append({"id": n, "positive": positive, "kind": kind, "service": service, "path": os.path.join(f"{n:05d}", path)})

    for name, stem, make in svcs:
        for _ in range(per_service):
            kind, fn = r.choice(tmpls)
            v = var_for(stem, r)
            path, text = fn(name, v, make())
            write(True, kind, name, path, text)
    for kind, path, text in negative_items(g, svcs, tmpls):
        write(False, kind, "", path, text)
    with open(os.path.join(out_dir, "labels.jsonl"), "w") as f:
        for l in labels:
            f.write(json.dumps(l) + "\n")
    pos = sum(l["positive"] for l in labels)
    print(f"wrote {len(labels)} files ({pos} positive, {len(labels) - pos} negative; {len(svcs)} services) to {files}")


def score(out_dir, rwfs, show):
    files = os.path.join(out_dir, "files")
    labels = [json.loads(l) for l in open(os.path.join(out_dir, "labels.jsonl"))]
    proc = subprocess.run([rwfs, "scan", "--json", "."], cwd=files, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"rwfs scan failed ({proc.returncode}): {proc.stderr}")
    report = json.loads(proc.stdout)
    action = {f["path"]: f["action"] for f in report["files"]}
    rules = {f["path"]: sorted({x["rule"] for x in f["findings"] if x.get("action") == "block"}) for f in report["files"]}
    by = {}
    wrong = []
    for l in labels:
        blocked = action.get(l["path"]) == "block"
        key = ("+" if l["positive"] else "-") + l["kind"]
        c = by.setdefault(key, [0, 0])
        c[0 if blocked else 1] += 1
        if blocked != l["positive"]:
            wrong.append(f"{'missed' if l['positive'] else 'false block'}: {l['path']} {l['service']} {rules.get(l['path'], [])}")
    tp = sum(v[0] for k, v in by.items() if k[0] == "+")
    fn = sum(v[1] for k, v in by.items() if k[0] == "+")
    fp = sum(v[0] for k, v in by.items() if k[0] == "-")
    tn = sum(v[1] for k, v in by.items() if k[0] == "-")
    print(f"second set: {len(labels)} files, {tp + fn} positive, {fp + tn} negative")
    print(f"{'kind':<28} {'blocked':>8} {'passed':>8}")
    for k in sorted(by):
        print(f"{k:<28} {by[k][0]:>8} {by[k][1]:>8}")
    p = tp / (tp + fp) if tp + fp else 1.0
    rc = tp / (tp + fn) if tp + fn else 1.0
    print(f"block precision {p:.3f}  recall {rc:.3f}  (tp {tp} fp {fp} fn {fn} tn {tn}); targets: recall >= 0.9 at precision >= 0.95")
    for w in wrong[:show]:
        print(w, file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("generate")
    a.add_argument("--out", required=True)
    a.add_argument("--seed", type=int, default=28)
    a.add_argument("--per-service", type=int, default=6)
    b = sub.add_parser("score")
    b.add_argument("--out", required=True)
    b.add_argument("--rwfs", required=True)
    b.add_argument("--show", type=int, default=40)
    args = ap.parse_args()
    if args.cmd == "generate":
        generate(args.out, args.seed, args.per_service)
    else:
        score(args.out, args.rwfs, args.show)


if __name__ == "__main__":
    main()
