//! The LaTeX check: one pass of a small scanner that knows what TeX does not read as markup.
//!
//! It reports what the reference reports, with its messages and order (brace errors,
//! environment errors, then warnings: missing document structure, the `\being` typo, `%` in a
//! URL, bare `_` outside math), but reads the source the way TeX does: `\{`, `\}`, `\%`, `\_`,
//! `\$` are characters, `%` starts a comment, `\verb|…|`, `\lstinline` and verbatim-like
//! environments are taken as they are, and math is tracked (`$…$`, `$$…$$`, `\(…\)`, `\[…\]`,
//! math environments; a blank line ends an unclosed `$`). The braced argument of a command
//! naming a key or a file (`\label`, `\ref`, `\cite`, `\input`, …) may hold `_`; that of `\url`
//! and `\href` may also hold `%`.
//!
//! It does not expand macros: a `\begin` hidden in a definition counts like any other, as in
//! the reference. It does know which control words exist: one used but neither defined in the
//! document (`\newcommand`, `\def`, `\DeclareMathOperator`, `\newif`, …) nor part of LaTeX or a
//! common package ([`KNOWN_MACROS`]) is a warning at its first use (the paper's `\layer`).

use std::collections::BTreeSet;

use super::Diagnostic;

pub(super) fn check(text: &str) -> Vec<Diagnostic> {
    let mut scanner = Scanner::new(text);
    scanner.run();
    scanner.finish()
}

/// What an open `{` is the start of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Plain,
    /// A key or file name (`\label{fig_a}`): `_` is fine.
    Name,
    /// A URL (`\url{…}`): `_` and `%` are characters.
    Url,
}

struct Brace {
    group: Group,
    line: usize,
    col: usize,
}

struct Env {
    name: String,
    line: usize,
    col: usize,
    math: bool,
}

struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    col: usize,
    braces: Vec<Brace>,
    envs: Vec<Env>,
    inline_math: bool,
    display_math: bool,
    bracket_math: bool,
    documentclass: bool,
    begin_document: bool,
    end_document: bool,
    brace_errors: Vec<Diagnostic>,
    env_errors: Vec<Diagnostic>,
    typos: Vec<Diagnostic>,
    url_percents: Vec<Diagnostic>,
    underscores: Vec<Diagnostic>,
    /// Control words used, with the place of each use.
    used: Vec<(&'a str, usize, usize)>,
    /// Control words the document defines.
    defined: BTreeSet<String>,
}

/// Environments whose body TeX does not read as markup.
const RAW_ENVS: &[&str] = &[
    "verbatim",
    "verbatim*",
    "Verbatim",
    "Verbatim*",
    "BVerbatim",
    "LVerbatim",
    "lstlisting",
    "minted",
    "comment",
    "filecontents",
    "filecontents*",
];

const MATH_ENVS: &[&str] =
    &["math", "displaymath", "equation", "eqnarray", "align", "alignat", "flalign", "gather", "multline"];

/// Commands whose braced argument is a key or a file name.
const NAME_COMMANDS: &[&str] = &[
    "label",
    "input",
    "include",
    "includeonly",
    "includegraphics",
    "includepdf",
    "lstinputlisting",
    "bibliography",
    "bibliographystyle",
    "addbibresource",
    "texttt",
];

/// Commands whose (first) braced argument is a URL or a path.
const URL_COMMANDS: &[&str] = &["url", "href", "nolinkurl", "path"];

fn is_name_command(name: &str) -> bool {
    // \ref, \eqref, \pageref, \autoref, \cref, \Cref, \nameref…; \cite, \citep, \parencite…
    NAME_COMMANDS.contains(&name) || name.ends_with("ref") || name.starts_with("cite") || name.ends_with("cite")
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            pos: 0,
            line: 1,
            col: 1,
            braces: Vec::new(),
            envs: Vec::new(),
            inline_math: false,
            display_math: false,
            bracket_math: false,
            documentclass: false,
            begin_document: false,
            end_document: false,
            brace_errors: Vec::new(),
            env_errors: Vec::new(),
            typos: Vec::new(),
            url_percents: Vec::new(),
            underscores: Vec::new(),
            used: Vec::new(),
            defined: BTreeSet::new(),
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    /// Move to byte `end` (a character boundary at or after the current position).
    fn advance_to(&mut self, end: usize) {
        while self.pos < end && self.bump().is_some() {}
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    fn group(&self) -> Group {
        self.braces.last().map_or(Group::Plain, |b| b.group)
    }

    fn in_math(&self) -> bool {
        self.inline_math || self.display_math || self.bracket_math || self.envs.iter().any(|e| e.math)
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                '\\' => self.control(),
                '%' if self.group() != Group::Url => self.comment(),
                '{' => {
                    let group = self.group();
                    self.open(group);
                }
                '}' => self.close(),
                '$' if self.group() != Group::Url => self.dollar(),
                '_' => {
                    if self.group() == Group::Plain && !self.in_math() {
                        self.underscores.push(Diagnostic::warning(
                            self.line,
                            Some(self.col),
                            "Unescaped '_' outside math mode (use \\_)",
                        ));
                    }
                    self.bump();
                }
                '\n' => {
                    self.bump();
                    let next = self.rest().trim_start_matches([' ', '\t', '\r']);
                    if next.starts_with('\n') {
                        // A paragraph break: TeX would stop an unclosed `$` here.
                        self.inline_math = false;
                    }
                }
                _ => {
                    self.bump();
                }
            }
        }
    }

    fn open(&mut self, group: Group) {
        self.braces.push(Brace { group, line: self.line, col: self.col });
        self.bump();
    }

    fn close(&mut self) {
        if self.braces.pop().is_none() {
            self.brace_errors.push(Diagnostic::error(self.line, Some(self.col), "Unexpected closing brace '}'"));
        }
        self.bump();
    }

    fn dollar(&mut self) {
        self.bump();
        if self.peek() == Some('$') {
            self.bump();
            self.display_math = !self.display_math;
        } else {
            self.inline_math = !self.inline_math;
        }
    }

    /// `%` to the end of the line; a `%` inside a URL-looking word is probably a mistake.
    fn comment(&mut self) {
        let line_start = self.text[..self.pos].rfind('\n').map_or(0, |i| i + 1);
        let before = &self.text[line_start..self.pos];
        let word = before.rsplit(char::is_whitespace).next().unwrap_or(before);
        if ["http://", "https://", "ftp://"].iter().any(|scheme| word.contains(scheme)) {
            self.url_percents.push(Diagnostic::warning(
                self.line,
                Some(self.col),
                "Unescaped '%' in URL (use \\% in LaTeX)",
            ));
        }
        let end = self.rest().find('\n').map_or(self.text.len(), |i| self.pos + i);
        self.advance_to(end);
    }

    fn control(&mut self) {
        let (line, col) = (self.line, self.col);
        self.bump();
        let Some(c) = self.peek() else { return };
        if !c.is_ascii_alphabetic() {
            // A control symbol: `\{`, `\%`, `\_`, `\\`, … are characters, not markup.
            self.bump();
            if self.group() == Group::Url {
                return;
            }
            match c {
                '(' | '[' => self.bracket_math = true,
                ')' | ']' => self.bracket_math = false,
                _ => {}
            }
            return;
        }
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.bump();
        }
        let name = &self.text[start..self.pos];
        if self.group() == Group::Url {
            return;
        }
        match name {
            "verb" => {
                if self.peek() == Some('*') {
                    self.bump();
                }
                self.verbatim_argument("verb", line, col);
            }
            "lstinline" => {
                self.options();
                self.verbatim_argument("lstinline", line, col);
            }
            "begin" => self.begin(line, col),
            "end" => self.end(line, col),
            "documentclass" => self.documentclass = true,
            "being" => {
                self.typos.push(Diagnostic::warning(line, Some(col), "Probable typo: \\being (did you mean \\begin?)"))
            }
            _ if URL_COMMANDS.contains(&name) => self.argument(Group::Url),
            _ if is_name_command(name) => self.argument(Group::Name),
            _ => {
                if DEFINING_COMMANDS.contains(&name) {
                    self.definition(name);
                }
                self.used.push((name, line, col));
            }
        }
    }

    /// The control word a definition command names, read ahead without consuming it (its
    /// braces are counted by the main loop): `\newcommand{\x}`, `\newcommand*\x`, `\def\x`,
    /// `\newif\ifx` (also `\xtrue`, `\xfalse`), `\newcounter{x}` (`\thex`).
    fn definition(&mut self, command: &str) {
        let rest = self.rest().trim_start_matches([' ', '\t']);
        let rest = rest.strip_prefix('*').unwrap_or(rest).trim_start_matches([' ', '\t']);
        let rest = rest.strip_prefix('{').unwrap_or(rest).trim_start();
        if command == "newcounter" {
            let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
            self.defined.insert(format!("the{name}"));
            return;
        }
        let Some(rest) = rest.strip_prefix('\\') else { return };
        let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
        if command == "newif"
            && let Some(flag) = name.strip_prefix("if")
        {
            self.defined.insert(format!("{flag}true"));
            self.defined.insert(format!("{flag}false"));
        }
        self.defined.insert(name);
    }

    /// Skip `*` and bracketed options, then open the braced argument as `group`.
    fn argument(&mut self, group: Group) {
        self.options();
        if self.peek() == Some('{') {
            self.open(group);
        }
    }

    /// Skip spaces, a `*` and `[…]` options (balanced, within a paragraph) before an argument.
    fn options(&mut self) {
        loop {
            self.skip_spaces();
            match self.peek() {
                Some('*') => {
                    self.bump();
                }
                Some('[') => match bracket_end(self.rest()) {
                    Some(len) => self.advance_to(self.pos + len),
                    None => return,
                },
                _ => return,
            }
        }
    }

    /// `\verb|…|` / `\lstinline{…}`: taken as is up to the closing delimiter on the same line.
    fn verbatim_argument(&mut self, command: &str, line: usize, col: usize) {
        let close = match self.peek() {
            Some('{') if command == "lstinline" => '}',
            Some(c) if c != '\n' && c != '\r' => c,
            _ => {
                self.brace_errors.push(Diagnostic::error(line, Some(col), format!("\\{command} ended by end of line")));
                return;
            }
        };
        self.bump();
        loop {
            match self.peek() {
                None | Some('\n') => {
                    self.brace_errors.push(Diagnostic::error(
                        line,
                        Some(col),
                        format!("\\{command} ended by end of line"),
                    ));
                    return;
                }
                Some(c) => {
                    self.bump();
                    if c == close {
                        return;
                    }
                }
            }
        }
    }

    /// `{name}` after `\begin`/`\end` (spaces allowed before it), consumed when well formed.
    fn env_name(&mut self) -> Option<String> {
        let rest = self.rest();
        let after_spaces = rest.trim_start_matches([' ', '\t']);
        let inner = after_spaces.strip_prefix('{')?;
        let end = inner.find(['}', '{', '\\', '\n'])?;
        if !inner[end..].starts_with('}') {
            return None;
        }
        let name = inner[..end].to_string();
        let consumed = rest.len() - after_spaces.len() + 1 + end + 1;
        self.advance_to(self.pos + consumed);
        Some(name)
    }

    fn begin(&mut self, line: usize, col: usize) {
        let Some(name) = self.env_name() else { return };
        if name == "document" {
            self.begin_document = true;
        }
        if RAW_ENVS.contains(&name.as_str()) {
            let end = format!("\\end{{{name}}}");
            match self.rest().find(&end) {
                Some(i) => self.advance_to(self.pos + i + end.len()),
                None => {
                    self.envs.push(Env { name, line, col, math: false });
                    self.advance_to(self.text.len());
                }
            }
            return;
        }
        let math = MATH_ENVS.contains(&name.trim_end_matches('*'));
        self.envs.push(Env { name, line, col, math });
    }

    fn end(&mut self, line: usize, col: usize) {
        let Some(name) = self.env_name() else { return };
        if name == "document" {
            self.end_document = true;
        }
        let message = match self.envs.last() {
            None => format!("\\end{{{name}}} without matching \\begin"),
            Some(top) if top.name == name => {
                self.envs.pop();
                return;
            }
            Some(top) => format!("\\end{{{name}}} mismatches \\begin{{{}}} opened at line {}", top.name, top.line),
        };
        self.envs.pop();
        self.env_errors.push(Diagnostic::error(line, Some(col), message));
    }

    fn finish(mut self) -> Vec<Diagnostic> {
        if let Some(outer) = self.braces.first() {
            // The whole text has been read: `line` is the last one.
            let last_line = self.line;
            self.brace_errors.push(Diagnostic::error(
                last_line,
                None,
                format!(
                    "Unclosed braces: {} still open at end of file (the outermost opened at line {}, column {})",
                    self.braces.len(),
                    outer.line,
                    outer.col
                ),
            ));
        }
        for env in self.envs.iter().rev() {
            self.env_errors.push(Diagnostic::error(
                env.line,
                Some(env.col),
                format!("\\begin{{{}}} never closed", env.name),
            ));
        }
        let mut out = self.brace_errors;
        out.append(&mut self.env_errors);
        for (found, what) in [
            (self.documentclass, "\\documentclass"),
            (self.begin_document, "\\begin{document}"),
            (self.end_document, "\\end{document}"),
        ] {
            if !found {
                out.push(Diagnostic::warning(1, None, format!("{what} not found")));
            }
        }
        out.append(&mut self.typos);
        out.append(&mut self.url_percents);
        out.append(&mut self.underscores);
        let known = known_macros();
        let mut reported = BTreeSet::new();
        for (name, line, col) in self.used {
            if !self.defined.contains(name) && !known.contains(name) && reported.insert(name) {
                out.push(Diagnostic::warning(
                    line,
                    Some(col),
                    format!("Undefined control sequence \\{name}: not defined in the document nor by LaTeX or a common package"),
                ));
            }
        }
        out
    }
}

/// The length of a `[…]` at the start of `text` up to and including its `]`, with balanced
/// braces inside and no blank line; `None` if it does not close.
fn bracket_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut previous_newline = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.checked_sub(1)?,
            ']' if depth == 0 => return Some(i + 1),
            '\n' if previous_newline => return None,
            _ => {}
        }
        if c != ' ' && c != '\t' && c != '\r' {
            previous_newline = c == '\n';
        }
    }
    None
}

/// Commands that define the control word after them.
const DEFINING_COMMANDS: &[&str] = &[
    "newcommand",
    "renewcommand",
    "providecommand",
    "DeclareRobustCommand",
    "NewDocumentCommand",
    "RenewDocumentCommand",
    "ProvideDocumentCommand",
    "DeclareDocumentCommand",
    "NewExpandableDocumentCommand",
    "DeclareMathOperator",
    "DeclarePairedDelimiter",
    "DeclareMathSymbol",
    "DeclareMathAlphabet",
    "newrobustcmd",
    "def",
    "gdef",
    "edef",
    "xdef",
    "let",
    "newif",
    "newlength",
    "newsavebox",
    "newcount",
    "newdimen",
    "newskip",
    "newtoks",
    "newbox",
    "chardef",
    "mathchardef",
    "newcounter",
    "newcolumntype",
    "colorlet",
];

/// Control words of LaTeX and of common packages (amsmath, amssymb, amsthm, graphicx, hyperref,
/// xcolor, booktabs, listings, geometry, natbib/biblatex, tikz basics, …).
const KNOWN_MACROS: &str = "
documentclass usepackage RequirePackage begin end item input include includeonly
newcommand renewcommand providecommand DeclareRobustCommand NewDocumentCommand RenewDocumentCommand
ProvideDocumentCommand DeclareDocumentCommand NewExpandableDocumentCommand newenvironment renewenvironment
newtheorem theoremstyle newcounter setcounter addtocounter stepcounter refstepcounter value arabic roman
Roman alph Alph fnsymbol newlength setlength addtolength settowidth settoheight settodepth def gdef edef
xdef let newif relax expandafter noexpand csname endcsname ifx ifnum ifdim else fi or makeatletter
makeatother title author date thanks maketitle and today abstract part chapter section subsection
subsubsection paragraph subparagraph appendix tableofcontents listoffigures listoftables caption
captionof label ref pageref eqref autoref cref Cref nameref cite citep citet citeauthor citeyear nocite
parencite textcite footcite autocite bibliography bibliographystyle addbibresource printbibliography
footnote footnotemark footnotetext marginpar textbf textit texttt textrm textsf textsc textsl textup
textmd textnormal emph underline bfseries itshape ttfamily rmfamily sffamily scshape slshape upshape
mdseries normalfont tiny scriptsize footnotesize small normalsize large Large LARGE huge Huge
centering raggedright raggedleft noindent indent par newline linebreak nolinebreak newpage clearpage
cleardoublepage pagebreak nopagebreak hspace vspace hfill vfill hfil vfil hskip vskip smallskip
medskip bigskip quad qquad enspace thinspace negthinspace hrule vrule hline cline toprule midrule
bottomrule cmidrule addlinespace multicolumn multirow tabularnewline arraystretch tabcolsep
includegraphics graphicspath rotatebox scalebox resizebox reflectbox width height depth totalheight
textwidth linewidth columnwidth textheight paperwidth paperheight baselineskip parindent parskip
fbox framebox mbox makebox parbox raisebox colorbox fcolorbox color textcolor definecolor pagecolor
url href nolinkurl hyperref hypersetup hypertarget hyperlink phantomsection path verb lstinline
lstinputlisting lstset lstdefinelanguage lstdefinestyle minted mintinline inputminted
pagestyle thispagestyle pagenumbering markboth markright fancyhf fancyhead fancyfoot lhead chead
rhead lfoot cfoot rfoot headrulewidth footrulewidth geometry ldots dots cdots vdots ddots dotsc
dotsb dotsm dotsi dotso TeX LaTeX LaTeXe copyright textregistered texttrademark dag ddag S P
pounds textbackslash textasciitilde textasciicircum textbar textless textgreater textquotedbl
textendash textemdash textbullet textperiodcentered textellipsis slash nobreakspace space
protect string number the show message typeout PackageError PackageWarning ClassError
ensuremath text mathrm mathbf mathit mathsf mathtt mathcal mathbb mathfrak mathscr boldsymbol bm
operatorname DeclareMathOperator frac dfrac tfrac cfrac binom dbinom tbinom sqrt left right middle
big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl Biggr sum prod coprod int iint iiint oint
bigcup bigcap bigoplus bigotimes bigvee bigwedge bigsqcup lim liminf limsup sup inf max min arg det
exp log ln lg sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth deg dim gcd hom ker
Pr bmod pmod mod overline underbrace overbrace overrightarrow overleftarrow widehat widetilde hat
tilde bar vec dot ddot acute grave breve check mathring stackrel overset underset substack
limits nolimits displaystyle textstyle scriptstyle scriptscriptstyle tag notag nonumber label
intertext shortintertext alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota
kappa lambda mu nu xi pi varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega
Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega aleph hbar ell wp Re Im partial
infty nabla forall exists nexists emptyset varnothing neg lnot top bot angle triangle backslash
prime surd flat natural sharp clubsuit diamondsuit heartsuit spadesuit pm mp times div cdot
circ bullet ast star setminus wr diamond oplus ominus otimes oslash odot bigcirc amalg cap cup
uplus sqcap sqcup vee wedge lor land lhd rhd unlhd unrhd leq le geq ge neq ne equiv sim simeq
approx cong propto prec succ preceq succeq ll gg subset supset subseteq supseteq sqsubset
sqsupset sqsubseteq sqsupseteq in ni notin vdash dashv models perp mid nmid parallel bowtie
smile frown asymp doteq leftarrow rightarrow Leftarrow Rightarrow leftrightarrow Leftrightarrow
longleftarrow longrightarrow Longleftarrow Longrightarrow longleftrightarrow Longleftrightarrow
mapsto longmapsto to gets iff implies impliedby uparrow downarrow Uparrow Downarrow updownarrow
Updownarrow nearrow searrow swarrow nwarrow hookleftarrow hookrightarrow leftharpoonup
rightharpoonup rightleftharpoons langle rangle lceil rceil lfloor rfloor lvert rvert lVert rVert
vert Vert lbrace rbrace lbrack rbrack leqslant geqslant lesssim gtrsim therefore because
mathbb checkmark blacksquare square Box qed qedhere qedsymbol mathop mathrel mathbin mathord
mathopen mathclose mathpunct mathinner phantom hphantom vphantom smash xrightarrow xleftarrow
cases split align aligned gathered pmatrix bmatrix vmatrix matrix hdots
tikz usetikzlibrary draw node fill filldraw coordinate foreach tikzset pgfplotsset addplot
clip shade shadedraw pgfmathsetmacro
emailaddress email address signature opening closing ps cc encl
frac kern mkern mskip hbox vbox vtop hss vss rule strut leavevmode ignorespaces unskip
footnoterule thepage thesection thechapter thesubsection thefigure thetable theequation
includepdf input endinput listfiles nonfrenchspacing frenchspacing sloppy fussy
selectlanguage foreignlanguage babel
newline bibitem thebibliography newblock
";

fn known_macros() -> &'static BTreeSet<&'static str> {
    static KNOWN: std::sync::OnceLock<BTreeSet<&'static str>> = std::sync::OnceLock::new();
    KNOWN.get_or_init(|| KNOWN_MACROS.split_whitespace().collect())
}
